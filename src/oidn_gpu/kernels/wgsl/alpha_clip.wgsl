// One float32 plane clipped to 0..1 into another (`oidn_gpu.kernels.coverage.generate_clip`):
// each plane an offset, a pixel and a row stride into its buffer, so either may be one
// channel of a wider image (an RGBA image's alpha).
{% include "bindings.wgsl" %}

@compute @workgroup_size(WG, WG, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.y >= params.height || id.x >= params.width) {
    return;
  }
  let src = params.src_offset + id.y * params.src_row_stride + id.x * params.src_pixel_stride;
  let dst = params.dst_offset + id.y * params.dst_row_stride + id.x * params.dst_pixel_stride;
  dst_image[dst] = clamp(src_image[src], 0.0, 1.0);
}
