// Element e of an image buffer as f32: `array<f32>`, or float16 pairs packed in `array<u32>`
// (element e is half e % 2 of word e / 2, widened exactly). Indices clamp to the buffer.
{% for image in images %}
fn load_{{ image.name }}(e: u32) -> f32 {
{% if image.f16 %}
  let word = {{ image.buffer }}[min(e >> 1u, arrayLength(&{{ image.buffer }}) - 1u)];
  let pair = unpack2x16float(word);
  return select(pair.x, pair.y, (e & 1u) != 0u);
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
