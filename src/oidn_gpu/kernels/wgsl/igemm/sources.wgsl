{% if unpack %}
// Four halfs stored as vec2<u32> (the same 8 bytes as vec4<f16>). unpack2x16float widens
// exactly, so the round trip through f32 keeps every bit of the stored halfs.
fn unpack_f16x4(p: vec2<u32>) -> vec4<f16> {
  return vec4<f16>(vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)));
}

{% endif %}
{% for s in sources %}
// Source {{ s.index }} at conv-resolution pixel (iy, ix), block b{{ s.note }}.
fn fetch{{ s.index }}(iy: u32, ix: u32, b: u32, conv_w: u32) -> {{ act_type }} {
  let index = {{ s.index_expr }};
  return {{ s.load }};
}

{% if base_offset %}
// Source {{ s.index }} relative to a cached pixel base: tap (ky, kx), parity (py, px) of the pixel.
fn fetch_base{{ s.index }}(base: u32, parity: vec2<i32>, tap: u32, b: u32, conv_w: u32) -> {{ act_type }} {
  let ky = i32(tap / 3u);
  let kx = i32(tap % 3u);
{% if s.upsample %}
  let dy = (parity.y + ky - 1) >> 1u;
  let dx = (parity.x + kx - 1) >> 1u;
  let offset = (dy * i32(conv_w / 2u) + dx) * i32({{ s.blocks }});
{% else %}
  let offset = ((ky - 1) * i32(conv_w) + kx - 1) * i32({{ s.blocks }});
{% endif %}
  let index = u32(i32(base) + offset) + b;
  return {{ s.load }};
}

// Block base of source {{ s.index }} at conv-resolution pixel (y, x).
fn base{{ s.index }}(y: u32, x: u32, conv_w: u32) -> u32 {
  return {{ s.base_expr }};
}

{% endif %}
{% endfor %}
