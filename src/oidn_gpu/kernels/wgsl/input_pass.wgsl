{% include "bindings.wgsl" %}

{% include "to_output.wgsl" %}

{% include "transfer.wgsl" %}

{% include "image_read.wgsl" %}
// Tensor pixel (ty, tx) of the [CHANNELS, tensor_height, tensor_width] network input.
// Inside the copy rectangle it holds the processed image pixel
// (src_y + ty - dst_y, src_x + tx - dst_x); everywhere else exact zeros.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.tensor_width || gid.y >= params.tensor_height) {
    return;
  }
  let dst = (gid.y * params.tensor_width + gid.x) * OUT_BLOCKS;
  let ry = i32(gid.y) - i32(params.dst_y);
  let rx = i32(gid.x) - i32(params.dst_x);
  let inside = ry >= 0 && rx >= 0 && ry < i32(params.copy_height) && rx < i32(params.copy_width);
  var main_v = vec3<f32>(0.0);
{% for image in aux %}
  var {{ image }}_v = vec3<f32>(0.0);
{% endfor %}
  if (inside) {
    let y = params.src_y + u32(ry);
    let x = params.src_x + u32(rx);
    main_v = sanitize3(read_main(y, x) * frame.input_scale, MAIN_LO, MAIN_HI);
{% if snorm %}
    main_v = main_v * 0.5 + 0.5;
{% endif %}
    main_v = transfer_forward3(main_v);
{% if "albedo" in aux %}
    albedo_v = sanitize3(read_albedo(y, x), 0.0, 1.0);
{% endif %}
{% if "normal" in aux %}
    normal_v = sanitize3(read_normal(y, x), -1.0, 1.0) * 0.5 + 0.5;
{% endif %}
  }
{% for block in blocks %}
  output[dst + {{ block.index }}u] = to_output(vec4<f32>({{ block.lanes }}));
{% endfor %}
}
