{% for ks in grp.ksteps %}
      {
{% for c in columns %}
        let wb{{ c.c }} = ({{ ks.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let w{{ c.c }}_0 = {{ widen_open }}weight_tile[wb{{ c.c }}]{{ widen_close }};
        let w{{ c.c }}_1 = {{ widen_open }}weight_tile[wb{{ c.c }} + 1u]{{ widen_close }};
        let w{{ c.c }}_2 = {{ widen_open }}weight_tile[wb{{ c.c }} + 2u]{{ widen_close }};
        let w{{ c.c }}_3 = {{ widen_open }}weight_tile[wb{{ c.c }} + 3u]{{ widen_close }};
{% endfor %}
{% for r in ks.rows %}
        let v{{ r.r }} = {{ widen_open }}input_tile[row_base + {{ r.offset }}u]{{ widen_close }};
{% for c in r.cols %}
        {{ c.lanes[0] }} = fma(w{{ c.c }}_0, {{ vec }}(v{{ r.r }}.x), {{ c.lanes[0] }});
        {{ c.lanes[1] }} = fma(w{{ c.c }}_1, {{ vec }}(v{{ r.r }}.y), {{ c.lanes[1] }});
        {{ c.lanes[2] }} = fma(w{{ c.c }}_2, {{ vec }}(v{{ r.r }}.z), {{ c.lanes[2] }});
        {{ c.lanes[3] }} = fma(w{{ c.c }}_3, {{ vec }}(v{{ r.r }}.w), {{ c.lanes[3] }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
