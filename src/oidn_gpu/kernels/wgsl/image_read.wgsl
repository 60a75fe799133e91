// Element e of an image buffer as f32: `array<f32>`, or float16 pairs packed in `array<u32>`
// (element e is half e % 2 of word e / 2, widened exactly). Indices clamp to the buffer.
{% if any_f16 %}

// The float16 bits `h` widened to f32 from the bits: subnormal halves become normal f32
// values, so no float conversion can flush them to zero; Inf and NaN stay so.
fn half_to_f32(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let exponent = (h >> 10u) & 0x1fu;
  let mantissa = h & 0x3ffu;
  if (exponent == 0u) {
    return bitcast<f32>(sign | bitcast<u32>(f32(mantissa) * HALF_SUBNORMAL_UNIT));
  }
  if (exponent == 31u) {
    return bitcast<f32>(sign | 0x7f800000u | (mantissa << 13u));
  }
  return bitcast<f32>(sign | ((exponent + HALF_TO_F32_BIAS) << 23u) | (mantissa << 13u));
}
{% endif %}
{% for image in images %}
fn load_{{ image.name }}(e: u32) -> f32 {
{% if image.f16 %}
  let word = {{ image.buffer }}[min(e >> 1u, arrayLength(&{{ image.buffer }}) - 1u)];
  return half_to_f32((word >> ((e & 1u) * 16u)) & 0xffffu);
{% else %}
  return {{ image.buffer }}[min(e, arrayLength(&{{ image.buffer }}) - 1u)];
{% endif %}
}

// Pixel (y, x) as 3 values, broadcasting C = 1 (p0, p0, p0) and C = 2 (p0, p1, p1).
fn read_{{ image.name }}(y: u32, x: u32) -> vec3<f32> {
  let base = params.{{ image.name }}_offset + y * params.{{ image.name }}_row_stride
    + x * params.{{ image.name }}_pixel_stride;
  let c1 = min(1u, params.{{ image.name }}_channels - 1u);
  let c2 = min(2u, params.{{ image.name }}_channels - 1u);
  return vec3<f32>(
    load_{{ image.name }}(base),
    load_{{ image.name }}(base + c1),
    load_{{ image.name }}(base + c2),
  );
}

{% endfor %}
