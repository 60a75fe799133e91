{% for r in grp.rows %}
{% for s in r.spairs %}
      {
        let pv = input_tile[row_base + {{ s.poffset }}u];
        let va = pv[0];
        let vb = pv[1];
{% for c in r.cols %}
        {
          let wa = ({{ s.tk0 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wb = ({{ s.tk1 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wa01 = weight_tile[wa];
          let wa23 = weight_tile[wa + 1u];
          let wb01 = weight_tile[wb];
          let wb23 = weight_tile[wb + 1u];
          {{ c.target }} = fma(wa01[0], vec4<f16>(va.x), {{ c.target }});
          {{ c.target }} = fma(wa01[1], vec4<f16>(va.y), {{ c.target }});
          {{ c.target }} = fma(wa23[0], vec4<f16>(va.z), {{ c.target }});
          {{ c.target }} = fma(wa23[1], vec4<f16>(va.w), {{ c.target }});
          {{ c.target }} = fma(wb01[0], vec4<f16>(vb.x), {{ c.target }});
          {{ c.target }} = fma(wb01[1], vec4<f16>(vb.y), {{ c.target }});
          {{ c.target }} = fma(wb23[0], vec4<f16>(vb.z), {{ c.target }});
          {{ c.target }} = fma(wb23[1], vec4<f16>(vb.w), {{ c.target }});
        }
{% endfor %}
      }
{% endfor %}
{% endfor %}
