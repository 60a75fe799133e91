{% for r in grp.rows %}
{% for s in r.steps %}
      {
        let v = {{ widen_open }}input_tile[row_base + {{ s.offset }}u]{{ widen_close }};
{% for c in s.cols %}
        let wb{{ c.c }} = ({{ s.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        {{ c.lanes[0] }} = fma({{ widen_open }}weight_tile[wb{{ c.c }}]{{ widen_close }}, {{ vec }}(v.x), {{ c.lanes[0] }});
        {{ c.lanes[1] }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 1u]{{ widen_close }}, {{ vec }}(v.y), {{ c.lanes[1] }});
        {{ c.lanes[2] }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 2u]{{ widen_close }}, {{ vec }}(v.z), {{ c.lanes[2] }});
        {{ c.lanes[3] }} = fma({{ widen_open }}weight_tile[wb{{ c.c }} + 3u]{{ widen_close }}, {{ vec }}(v.w), {{ c.lanes[3] }});
{% endfor %}
      }
{% endfor %}
{% endfor %}
