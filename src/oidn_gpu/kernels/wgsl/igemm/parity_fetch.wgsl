      // parity K order: per source, its taps (2x2 upsampled, else 3x3) outer, blocks inner
      let k = {{ step.kb }} + k_lane;
      var src = {{ parity_sources | length }}u;
      var tap = 0u;
      var sb = 0u;
      var bit = 31u;  // no tap: K past the end
{% for s in parity_sources %}
      {{ s.branch }} (k < {{ s.k_end }}) {
        src = {{ s.index }}u;
        tap = (k - {{ s.k_start }}) / {{ s.blocks }};
        sb = (k - {{ s.k_start }}) % {{ s.blocks }};
        bit = tap{{ " + 9u" if s.upsample else "" }};
{% endfor %}
      }
{% for l in loads %}
      {
        var v = {{ act_type }}();
        if (((mask{{ l.j }} >> bit) & 1u) != 0u) {
{% for s in parity_sources %}
          {{ s.branch }} (src == {{ s.index }}u) {
            v = {{ l.parity_fetch[s.index] }};
{% endfor %}
          }
        }
        in{{ l.j }} = v;
      }
{% endfor %}
