{% for ks in grp.ksteps %}
      {
{% for c in columns %}
        let wb{{ c.c }} = ({{ ks.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let w{{ c.c }}_0 = weight_tile[wb{{ c.c }}];
        let w{{ c.c }}_1 = weight_tile[wb{{ c.c }} + 1u];
        let w{{ c.c }}_2 = weight_tile[wb{{ c.c }} + 2u];
        let w{{ c.c }}_3 = weight_tile[wb{{ c.c }} + 3u];
{% endfor %}
{% for r in ks.rows %}
        let v{{ r.r }} = input_tile[row_base + {{ r.offset }}u];
{% for c in r.cols %}
        {{ c.target }} = fma(w{{ c.c }}_0, {{ vec }}(v{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_1, {{ vec }}(v{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_2, {{ vec }}(v{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_3, {{ vec }}(v{{ r.r }}.w), {{ c.target }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
