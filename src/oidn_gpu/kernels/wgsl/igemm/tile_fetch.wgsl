    // global loads of the K tile at {{ step.kb }} into registers (zeros outside the tensor)
    {
{% if parity %}
{% include "igemm/parity_fetch.wgsl" %}
{% else %}
{% include "igemm/k_lane.wgsl" %}
{% if source_first %}
{% for s in sources %}
      {{ s.branch }} (ib < {{ s.end }}) {
        let sb = ib - {{ s.offset }};
{% for l in loads %}
        {
{% include "igemm/load_ok.wgsl" %}
          var v = {{ act_type }}();
          if (ok) {
            v = {{ l.fetch_in_source[s.index] }};
          }
          in{{ l.j }} = v;
        }
{% endfor %}
{% endfor %}
      } else {
        // K past the end (only when IN_BLOCKS and the K tile do not align): zeros
{% for l in loads %}
        in{{ l.j }} = {{ act_type }}();
{% endfor %}
      }
{% else %}
{% for l in loads %}
      {
{% include "igemm/load_ok.wgsl" %}
        var v = {{ act_type }}();
        if (ok) {
{% for s in sources %}
          {{ s.branch }} (ib < {{ s.end }}) {
            v = {{ l.fetch[s.index] }};
{% endfor %}
          }
        }
        in{{ l.j }} = v;
      }
{% endfor %}
{% endif %}
{% endif %}
{% for l in weight_loads %}
      {
        let li = local_linear + {{ l.offset }}u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = {{ step.kb }} + tk;
        var w = {{ act_type }}();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight({{ weight_index }});
        }
        wt{{ l.j }} = w;
      }
{% endfor %}
    }
