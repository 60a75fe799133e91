{% for r in grp.rows %}
{% for s in r.steps %}
      {
        let v = {{ widen_open }}input_tile[row_base + {{ s.offset }}u]{{ widen_close }};
{% for c in r.cols %}
        let wb{{ c.c }} = ({{ s.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        {{ c.target }} = fma({{ widen_open }}weight_tile[wb{{ c.c }}]{{ widen_close }}, {{ vec }}(v.x), {{ c.target }});
        {{ c.target }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 1u]{{ widen_close }}, {{ vec }}(v.y), {{ c.target }});
        {{ c.target }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 2u]{{ widen_close }}, {{ vec }}(v.z), {{ c.target }});
        {{ c.target }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 3u]{{ widen_close }}, {{ vec }}(v.w), {{ c.target }});
{% endfor %}
      }
{% endfor %}
{% endfor %}
