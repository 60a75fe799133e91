  // Rows row0, row0 + 1 are the top (even lid.y) or bottom (odd lid.y) pair of a quad.
{% for c in columns %}
  let half{{ c.c }} = max(activate(acc0_{{ c.c }}), activate(acc1_{{ c.c }}));
  if ((lid.y & 1u) == 1u) {
    pool_half[((lid.y / 2u) * WG_X + lid.x) * COLS + {{ c.c }}u] = half{{ c.c }};
  }
{% endfor %}
  workgroupBarrier();
  if ((lid.y & 1u) == 0u) {
    let p = row0 / 4u;
{% for c in columns %}
    let out_ob{{ c.c }} = ob0 + {{ c.col_offset }}u;
    if (out_ob{{ c.c }} < OUT_BLOCKS && p < out_h * out_w) {
      let m = max(half{{ c.c }}, pool_half[((lid.y / 2u) * WG_X + lid.x) * COLS + {{ c.c }}u]);
      output[p * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(m);
    }
{% endfor %}
  }
