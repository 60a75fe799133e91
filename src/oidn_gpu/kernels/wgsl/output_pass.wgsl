{% include "bindings.wgsl" %}

{% include "transfer.wgsl" %}

// Kept pixel (y, x) of a height x width rectangle: network output at tensor pixel
// (src_y + y, src_x + x) -> image pixel (dst_y + y, dst_x + x), first out_channels values.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.width || gid.y >= params.height) {
    return;
  }
  let t = ((params.src_y + gid.y) * params.tensor_width + params.src_x + gid.x) * IN_BLOCKS;
  let net = vec4<f32>(input[min(t, arrayLength(&input) - 1u)]).xyz;
  var v = transfer_inverse3(sanitize3(net, 0.0, FLT_MAX));
  if (params.out_channels == 1u) {
    v = vec3<f32>((v.x + v.y + v.z) * ONE_THIRD);
  }
{% if snorm %}
  v = max(v * 2.0 - 1.0, vec3<f32>(-1.0));
{% endif %}
{% if not hdr %}
  v = min(v, vec3<f32>(1.0));
{% endif %}
  v = v * frame.output_scale;
  let base = params.out_offset + (params.dst_y + gid.y) * params.out_row_stride
    + (params.dst_x + gid.x) * params.out_pixel_stride;
  let last = arrayLength(&output) - 1u;
  output[min(base, last)] = v.x;
  if (params.out_channels >= 2u) {
    output[min(base + 1u, last)] = v.y;
  }
  if (params.out_channels >= 3u) {
    output[min(base + 2u, last)] = v.z;
  }
}
