{% include "bindings.wgsl" %}

// Pass 2 of the temporal mode (oidn_gpu.temporal.passes.stabilize, the same arithmetic in
// the same order): the reprojected previous output clamped to the window of the pixel in
// the denoised frame (edge pixels repeated), blended with it by one over the output's
// history length. The three channels share each window's loads: each component takes
// the operations of its channel in the same order. The reprojection (and the session's
// `state`) are bound as vec4s: 16 floats per pixel, four at a time.
{% if session %}
// The denoised frame is read as bits: a non-finite pixel counts as 0 in the windows and
// is passed through to `out` (bits) as it is. The next history state
// (oidn_gpu.temporal.passes.next_state) is written into `state`.

{% include "temporal_bits.wgsl" %}

fn denoised_at(q: u32) -> f32 {
  let bits = denoised[q];
  return select(0.0, bitcast<f32>(bits), bits_finite(bits));
}
{% else %}
// The denoised frame is finite (the host sanitizes and restores it).

fn denoised_at(q: u32) -> f32 {
  return denoised[q];
}
{% endif %}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  let p = id.y * width + id.x;
  // the pixel's reprojection (16 floats: 4 vec4s)
  var rep: array<f32, REPROJECTION_CHANNELS>;
  for (var v = 0u; v < 4u; v = v + 1u) {
    let four = reprojection[p * 4u + v];
    for (var i = 0u; i < 4u; i = i + 1u) {
      rep[4u * v + i] = four[i];
    }
  }
  let beta = 1.0 / rep[REPROJECTION_OUTPUT_COUNT];
  let iw = i32(width);
  let ih = i32(height);
  let d = vec3<f32>(denoised_at(p * 3u), denoised_at(p * 3u + 1u), denoised_at(p * 3u + 2u));
  var h = vec3<f32>(rep[STATE_OUTPUT], rep[STATE_OUTPUT + 1u], rep[STATE_OUTPUT + 2u]);
{% if clamp != "none" %}
  var total = vec3<f32>(0.0);
  var squares = vec3<f32>(0.0);
  var low = vec3<f32>(0.0);
  var high = vec3<f32>(0.0);
  for (var dy = -RADIUS; dy <= RADIUS; dy = dy + 1) {
    let yc = u32(clamp(i32(id.y) + dy, 0, ih - 1));
    for (var dx = -RADIUS; dx <= RADIUS; dx = dx + 1) {
      let q = (yc * width + u32(clamp(i32(id.x) + dx, 0, iw - 1))) * 3u;
      let v = vec3<f32>(denoised_at(q), denoised_at(q + 1u), denoised_at(q + 2u));
      total = total + v;
      squares = squares + v * v;
      if (dy == -RADIUS && dx == -RADIUS) {
        low = v;
        high = v;
      } else {
        low = min(low, v);
        high = max(high, v);
      }
    }
  }
{% if clamp == "variance" %}
  let mean = total * INV_WINDOW;
  let spread = GAMMA * sqrt(max(squares * INV_WINDOW - mean * mean, vec3<f32>(0.0)));
  low = mean - spread;
  high = mean + spread;
{% endif %}
  h = min(max(h, low), high);
{% endif %}
  let value = select(h + (d - h) * beta, d, beta >= 1.0);
{% if session %}
  // the next state (16 floats: 4 vec4s): the accumulated signal and its history length,
  // this output, its history length
  var next: array<f32, STATE_CHANNELS>;
  for (var c = 0u; c <= STATE_COUNT; c = c + 1u) {
    next[c] = rep[c];
  }
{% endif %}
  for (var c = 0u; c < 3u; c = c + 1u) {
{% if session %}
    let raw = denoised[p * 3u + c];
    let bits = select(raw, bitcast<u32>(value[c]), bits_finite(raw));
    out[p * 3u + c] = bits;
    next[STATE_OUTPUT + c] = bits_to_finite(bits, 0.0, MAX_SIGNAL);
{% else %}
    out[p * 3u + c] = value[c];
{% endif %}
  }
{% if session %}
  next[STATE_OUTPUT_COUNT] = rep[REPROJECTION_OUTPUT_COUNT];
  next[14u] = 0.0;
  next[15u] = 0.0;
  for (var v = 0u; v < 4u; v = v + 1u) {
    state[p * 4u + v] = vec4<f32>(next[4u * v], next[4u * v + 1u], next[4u * v + 2u],
                                  next[4u * v + 3u]);
  }
{% endif %}
}
