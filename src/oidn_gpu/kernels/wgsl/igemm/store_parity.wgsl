{% for c in columns %}
  let out_ob{{ c.c }} = ob0 + {{ c.col_offset }}u;
  if (out_ob{{ c.c }} < OUT_BLOCKS) {
{% for r in rows %}
    if (row0 + {{ r.r }}u < row_count) {
      let pix = parity_pixel(row0 + {{ r.r }}u, cls, conv_w);
      output[(pix.y * conv_w + pix.x) * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(activate(acc{{ r.r }}_{{ c.c }}));
    }
{% endfor %}
  }
{% endfor %}
