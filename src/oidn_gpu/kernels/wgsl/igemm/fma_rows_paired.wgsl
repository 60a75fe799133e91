{% for r in grp.rows %}
{% for s in r.spairs %}
      {
        let pv = input_tile[row_base + {{ s.poffset }}u];
        let va = {{ widen_open }}pv[0]{{ widen_close }};
        let vb = {{ widen_open }}pv[1]{{ widen_close }};
{% for c in r.cols %}
        {
          let wa = ({{ s.tk0 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wb = ({{ s.tk1 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wa01 = weight_tile[wa];
          let wa23 = weight_tile[wa + 1u];
          let wb01 = weight_tile[wb];
          let wb23 = weight_tile[wb + 1u];
          {{ c.even[0] }} = fma({{ widen_open }}wa01[0]{{ widen_close }}, {{ vec }}(va.x), {{ c.even[0] }});
          {{ c.even[1] }} = fma({{ widen_open }}wa01[1]{{ widen_close }}, {{ vec }}(va.y), {{ c.even[1] }});
          {{ c.even[2] }} = fma({{ widen_open }}wa23[0]{{ widen_close }}, {{ vec }}(va.z), {{ c.even[2] }});
          {{ c.even[3] }} = fma({{ widen_open }}wa23[1]{{ widen_close }}, {{ vec }}(va.w), {{ c.even[3] }});
          {{ c.odd[0] }} = fma({{ widen_open }}wb01[0]{{ widen_close }}, {{ vec }}(vb.x), {{ c.odd[0] }});
          {{ c.odd[1] }} = fma({{ widen_open }}wb01[1]{{ widen_close }}, {{ vec }}(vb.y), {{ c.odd[1] }});
          {{ c.odd[2] }} = fma({{ widen_open }}wb23[0]{{ widen_close }}, {{ vec }}(vb.z), {{ c.odd[2] }});
          {{ c.odd[3] }} = fma({{ widen_open }}wb23[1]{{ widen_close }}, {{ vec }}(vb.w), {{ c.odd[3] }});
        }
{% endfor %}
      }
{% endfor %}
{% endfor %}
