{% for r in grp.rows %}
{% for s in r.steps %}
      {
        let v = input_tile[row_base + {{ s.offset }}u];
{% for c in r.cols %}
        let wb{{ c.c }} = ({{ s.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        {{ c.target }} = fma(weight_tile[wb{{ c.c }}], {{ vec }}(v.x), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 1u], {{ vec }}(v.y), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 2u], {{ vec }}(v.z), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 3u], {{ vec }}(v.w), {{ c.target }});
{% endfor %}
      }
{% endfor %}
{% endfor %}
