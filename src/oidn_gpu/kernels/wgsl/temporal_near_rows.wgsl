{% include "bindings.wgsl" %}

// Pass 1c, first half (oidn_gpu.temporal.passes.drop_near_disocclusions): 1 where a pixel
// of the same row within MARGIN pixels has no history (the reprojection's valid flag
// under 0.5), else 0. Pixels off the image count as having history. The device session's
// form reads the flags from `missing` (1 float per pixel: 1 where a pixel has no history,
// written by the reprojection's accumulation) instead of the reprojection's 16 channels.

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  let row = id.y * width;
  let first = u32(max(i32(id.x) - MARGIN, 0));
  let last = u32(min(i32(id.x) + MARGIN, i32(width) - 1));
  var near = 0.0;
  for (var x = first; x <= last; x = x + 1u) {
{% if compact %}
    if (missing[row + x] > 0.5) {
{% else %}
    if (reprojection[(row + x) * REPROJECTION_CHANNELS + REPROJECTION_VALID] < 0.5) {
{% endif %}
      near = 1.0;
    }
  }
  out[row + id.x] = near;
}
