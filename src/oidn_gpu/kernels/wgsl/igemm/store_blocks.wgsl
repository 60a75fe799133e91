{% for c in columns %}
  let out_ob{{ c.c }} = ob0 + {{ c.col_offset }}u;
  if (out_ob{{ c.c }} < OUT_BLOCKS) {
{% if pool %}
{% for g in pool_groups %}
    {
      let p = row0 / 4u + {{ g.g }}u;
      if (p < out_h * out_w) {
        var m = activate(acc{{ g.r0 }}_{{ c.c }});
        m = max(m, activate(acc{{ g.r1 }}_{{ c.c }}));
        m = max(m, activate(acc{{ g.r2 }}_{{ c.c }}));
        m = max(m, activate(acc{{ g.r3 }}_{{ c.c }}));
        output[p * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(m);
      }
    }
{% endfor %}
{% else %}
{% for r in rows %}
    if (row0 + {{ r.r }}u < row_count) {
      output[(row0 + {{ r.r }}u) * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(activate(acc{{ r.r }}_{{ c.c }}));
    }
{% endfor %}
{% endif %}
  }
{% endfor %}
