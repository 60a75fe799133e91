{% if analytic %}
        let m = m_base + {{ l.row_offset }}u;
        let pix = row_pixel(m, out_w, conv_w);
        let ok = k_ok && m < row_count && ((tap_mask(pix.y, pix.x, conv_h, conv_w) >> tap) & 1u) != 0u;
{% else %}
        let pix = pix{{ l.j }};
        let ok = k_ok && ((mask{{ l.j }} >> tap) & 1u) != 0u;
{% endif %}
