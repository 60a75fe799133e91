// Parity form: output (conv-resolution) pixel of GEMM row m of parity cls, as vec2(x, y).
fn parity_pixel(m: u32, cls: u32, conv_w: u32) -> vec2<u32> {
  let low_w = conv_w / 2u;
  return vec2<u32>((m % low_w) * 2u + (cls & 1u), (m / low_w) * 2u + cls / 2u);
}

// Bit 2 * dy + dx is set when the 2x2 low-resolution tap (dy, dx) of output pixel (y, x)
// lies inside the upsampled source: low row (y / 2) + (y % 2) + dy - 1, the same for x.
// Its first row (column) is outside only at y = 0, its second only at y = conv_h - 1.
fn parity_mask(y: u32, x: u32, conv_h: u32, conv_w: u32) -> u32 {
  let cols = select(0u, 0x5u, x > 0u) | select(0u, 0xau, x + 1u < conv_w);
  let rows = select(0u, 0x3u, y > 0u) | select(0u, 0xcu, y + 1u < conv_h);
  return cols & rows;
}

{% for s in parity_sources if s.upsample %}
// Source {{ s.index }} (nearest x2 upsampled) at 2x2 tap t of output pixel pix, block b.
fn fetch_parity{{ s.index }}(pix: vec2<u32>, t: u32, b: u32, conv_w: u32) -> {{ act_type }} {
  let ly = (pix.y >> 1u) + (pix.y & 1u) + t / 2u - 1u;
  let lx = (pix.x >> 1u) + (pix.x & 1u) + t % 2u - 1u;
  let index = (ly * (conv_w / 2u) + lx) * {{ s.blocks }} + b;
  return {{ s.load }};
}

{% endfor %}
