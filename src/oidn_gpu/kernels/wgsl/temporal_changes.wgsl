{% include "bindings.wgsl" %}

// Pass 1b of the temporal mode (oidn_gpu.temporal.passes.reject_changes, the same
// arithmetic in the same order): the input history dropped, and the output's cut to
// CHANGE_OUTPUT_HISTORY frames, where the frame's mean luminance (fireflies limited) over
// the window differs from the reprojected previous output's by more than CHANGE_SIGMAS
// standard errors of the noisy mean. Inputs are finite.
{% if luma %}
// The device session's form: the luminances come from `luma` (the reprojection's
// accumulation wrote them) and the reprojection (`out`) is changed in place, only where
// the history is dropped (each invocation reads and writes only its own pixel of it).
{% endif %}

fn luminance_at(buffer_is_signal: bool, q: u32) -> f32 {
{% if luma %}
  // computed once per pixel by the reprojection (its "accumulate" part)
  return luma[q * 2u + select(1u, 0u, buffer_is_signal)];
{% else %}
  if (buffer_is_signal) {
    let s = q * SIGNAL_CHANNELS;
    let l = LUMINANCE_R * signal[s] + LUMINANCE_G * signal[s + 1u] + LUMINANCE_B * signal[s + 2u];
    // its fireflies limited by the reprojection's factor
    return clamp(l * gathered[q * REPROJECTION_CHANNELS + REPROJECTION_INPUT_SCALE],
                 -MAX_LUMINANCE, MAX_LUMINANCE);
  }
  let g = q * REPROJECTION_CHANNELS + STATE_OUTPUT;
  let l = LUMINANCE_R * gathered[g] + LUMINANCE_G * gathered[g + 1u]
    + LUMINANCE_B * gathered[g + 2u];
  return clamp(l, -MAX_LUMINANCE, MAX_LUMINANCE);
{% endif %}
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  let p = id.y * width + id.x;
  let o = p * REPROJECTION_CHANNELS;
  var total = 0.0;
  var squares = 0.0;
  var total_previous = 0.0;
  for (var dy = -RADIUS; dy <= RADIUS; dy = dy + 1) {
    let yc = u32(clamp(i32(id.y) + dy, 0, i32(height) - 1));
    for (var dx = -RADIUS; dx <= RADIUS; dx = dx + 1) {
      let q = yc * width + u32(clamp(i32(id.x) + dx, 0, i32(width) - 1));
      let v = luminance_at(true, q);
      total = total + v;
      squares = squares + v * v;
      total_previous = total_previous + luminance_at(false, q);
    }
  }
  let mean = total * INV_WINDOW;
  let mean_squares = squares * INV_WINDOW;
  let error = sqrt(max(mean_squares - mean * mean, 0.0)) / SIDE;
{% if luma %}
  let changed = abs(mean - total_previous * INV_WINDOW) > CHANGE_SIGMAS * error
    && out[o + REPROJECTION_VALID] > 0.5;
  if (changed) {
    for (var c = 0u; c < SIGNAL_CHANNELS; c = c + 1u) {
      out[o + c] = signal[p * SIGNAL_CHANNELS + c];
    }
    out[o + STATE_COUNT] = 1.0;
    out[o + REPROJECTION_OUTPUT_COUNT] = min(out[o + REPROJECTION_OUTPUT_COUNT],
                                             CHANGE_OUTPUT_HISTORY);
  }
{% else %}
  let changed = abs(mean - total_previous * INV_WINDOW) > CHANGE_SIGMAS * error
    && gathered[o + REPROJECTION_VALID] > 0.5;
  for (var c = 0u; c < REPROJECTION_CHANNELS; c = c + 1u) {
    var v = gathered[o + c];
    if (changed) {
      if (c < SIGNAL_CHANNELS) {
        v = signal[p * SIGNAL_CHANNELS + c];
      } else if (c == STATE_COUNT) {
        v = 1.0;
      } else if (c == REPROJECTION_OUTPUT_COUNT) {
        v = min(v, CHANGE_OUTPUT_HISTORY);
      }
    }
    out[o + c] = v;
  }
{% endif %}
}
