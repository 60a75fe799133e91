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
        let w{{ c.c }}_0 = {{ widen_open }}wa{{ c.c }}_01[0]{{ widen_close }};
        let w{{ c.c }}_1 = {{ widen_open }}wa{{ c.c }}_01[1]{{ widen_close }};
        let w{{ c.c }}_2 = {{ widen_open }}wa{{ c.c }}_23[0]{{ widen_close }};
        let w{{ c.c }}_3 = {{ widen_open }}wa{{ c.c }}_23[1]{{ widen_close }};
        let x{{ c.c }}_0 = {{ widen_open }}wb{{ c.c }}_01[0]{{ widen_close }};
        let x{{ c.c }}_1 = {{ widen_open }}wb{{ c.c }}_01[1]{{ widen_close }};
        let x{{ c.c }}_2 = {{ widen_open }}wb{{ c.c }}_23[0]{{ widen_close }};
        let x{{ c.c }}_3 = {{ widen_open }}wb{{ c.c }}_23[1]{{ widen_close }};
{% endfor %}
{% for r in kp.rows %}
        let p{{ r.r }} = input_tile[row_base + {{ r.poffset }}u];
        let v{{ r.r }} = {{ widen_open }}p{{ r.r }}[0]{{ widen_close }};
        let u{{ r.r }} = {{ widen_open }}p{{ r.r }}[1]{{ widen_close }};
{% for c in r.cols %}
        {{ c.even[0] }} = fma(w{{ c.c }}_0, {{ vec }}(v{{ r.r }}.x), {{ c.even[0] }});
        {{ c.even[1] }} = fma(w{{ c.c }}_1, {{ vec }}(v{{ r.r }}.y), {{ c.even[1] }});
        {{ c.even[2] }} = fma(w{{ c.c }}_2, {{ vec }}(v{{ r.r }}.z), {{ c.even[2] }});
        {{ c.even[3] }} = fma(w{{ c.c }}_3, {{ vec }}(v{{ r.r }}.w), {{ c.even[3] }});
        {{ c.odd[0] }} = fma(x{{ c.c }}_0, {{ vec }}(u{{ r.r }}.x), {{ c.odd[0] }});
        {{ c.odd[1] }} = fma(x{{ c.c }}_1, {{ vec }}(u{{ r.r }}.y), {{ c.odd[1] }});
        {{ c.odd[2] }} = fma(x{{ c.c }}_2, {{ vec }}(u{{ r.r }}.z), {{ c.odd[2] }});
        {{ c.odd[3] }} = fma(x{{ c.c }}_3, {{ vec }}(u{{ r.r }}.w), {{ c.odd[3] }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
