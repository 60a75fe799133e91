  // Per-load output pixel and tap masks (0 for rows past the end), computed once: bits 0-8
  // the 3x3 taps (full-resolution sources), bits 9-12 the 2x2 taps (upsampled sources).
{% for l in loads %}
  let m{{ l.j }} = m_base + {{ l.row_offset }}u;
  let pix{{ l.j }} = parity_pixel(m{{ l.j }}, cls, conv_w);
  let mask{{ l.j }} = select(0u, tap_mask(pix{{ l.j }}.y, pix{{ l.j }}.x, conv_h, conv_w) | (parity_mask(pix{{ l.j }}.y, pix{{ l.j }}.x, conv_h, conv_w) << 9u), m{{ l.j }} < row_count);
{% endfor %}
