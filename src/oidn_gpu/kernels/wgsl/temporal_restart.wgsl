{% include "bindings.wgsl" %}

// The reprojection of a frame without history (what oidn_gpu.temporal.passes.reproject
// gives from an empty state: the frame's own signal, n = 1, no previous output, no
// history, output history length 1), written over `out` where the host asked for a restart
// (params.restart) or where fewer than params.keep_min pixels kept their history
// (counter[0], a camera cut); otherwise nothing is written.

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  if (params.restart == 0u && counter[0] >= params.keep_min) {
    return;
  }
  let p = id.y * width + id.x;
  let o = p * REPROJECTION_CHANNELS;
  for (var c = 0u; c < SIGNAL_CHANNELS; c = c + 1u) {
    out[o + c] = signal[p * SIGNAL_CHANNELS + c];
  }
  out[o + STATE_COUNT] = 1.0;
  for (var c = 0u; c < 3u; c = c + 1u) {
    out[o + STATE_OUTPUT + c] = 0.0;
  }
  out[o + REPROJECTION_VALID] = 0.0;
  out[o + REPROJECTION_OUTPUT_COUNT] = 1.0;
  out[o + REPROJECTION_INPUT_SCALE] = 1.0;
}
