{% include "bindings.wgsl" %}

// Pass 1c, second half (oidn_gpu.temporal.passes.drop_near_disocclusions): where a pixel
// of the same column within MARGIN pixels has a 1 in `rows`, the reprojection (`out`,
// changed in place: each invocation reads and writes only its own pixel) takes the frame's
// own signal (its color scaled by the reprojection's firefly factor) and a history length of 1; the output's history is kept.

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  let first = u32(max(i32(id.y) - MARGIN, 0));
  let last = u32(min(i32(id.y) + MARGIN, i32(height) - 1));
  var near = false;
  for (var y = first; y <= last; y = y + 1u) {
    if (rows[y * width + id.x] > 0.5) {
      near = true;
    }
  }
  if (!near) {
    return;
  }
  let p = id.y * width + id.x;
  let o = p * REPROJECTION_CHANNELS;
  let scale = out[o + REPROJECTION_INPUT_SCALE];  // the frame's fireflies limited
  for (var c = 0u; c < SIGNAL_CHANNELS; c = c + 1u) {
    out[o + c] = signal[p * SIGNAL_CHANNELS + c] * select(1.0, scale, c < 3u);
  }
  out[o + STATE_COUNT] = 1.0;
}
