{% for kp in grp.kpairs %}
      {
        // K blocks {{ kp.tk0 }} and {{ kp.tk1 }}: one 16-byte load per row and per weight pair
{% for c in columns %}
        let wa{{ c.c }} = ({{ kp.tk0 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let wb{{ c.c }} = ({{ kp.tk1 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let wa{{ c.c }}_01 = weight_tile[wa{{ c.c }}];
        let wa{{ c.c }}_23 = weight_tile[wa{{ c.c }} + 1u];
        let wb{{ c.c }}_01 = weight_tile[wb{{ c.c }}];
        let wb{{ c.c }}_23 = weight_tile[wb{{ c.c }} + 1u];
        let w{{ c.c }}_0 = wa{{ c.c }}_01[0];
        let w{{ c.c }}_1 = wa{{ c.c }}_01[1];
        let w{{ c.c }}_2 = wa{{ c.c }}_23[0];
        let w{{ c.c }}_3 = wa{{ c.c }}_23[1];
        let x{{ c.c }}_0 = wb{{ c.c }}_01[0];
        let x{{ c.c }}_1 = wb{{ c.c }}_01[1];
        let x{{ c.c }}_2 = wb{{ c.c }}_23[0];
        let x{{ c.c }}_3 = wb{{ c.c }}_23[1];
{% endfor %}
{% for r in kp.rows %}
        let p{{ r.r }} = input_tile[row_base + {{ r.poffset }}u];
        let v{{ r.r }} = p{{ r.r }}[0];
        let u{{ r.r }} = p{{ r.r }}[1];
{% for c in r.cols %}
        {{ c.target }} = fma(w{{ c.c }}_0, vec4<f16>(v{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_1, vec4<f16>(v{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_2, vec4<f16>(v{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_3, vec4<f16>(v{{ r.r }}.w), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_0, vec4<f16>(u{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_1, vec4<f16>(u{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_2, vec4<f16>(u{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_3, vec4<f16>(u{{ r.r }}.w), {{ c.target }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
