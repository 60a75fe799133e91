{% include "bindings.wgsl" %}

{% include "to_output.wgsl" %}

// Pixel (y, x) of the dense [H, W, CHANNELS] f32 source becomes OUT_BLOCKS vec4s.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.width || gid.y >= params.height) {
    return;
  }
  let pixel = gid.y * params.width + gid.x;
  let src = pixel * CHANNELS;
  let dst = pixel * OUT_BLOCKS;
{% for block in blocks %}
  output[dst + {{ block.index }}u] = to_output(vec4<f32>({{ block.lanes }}));
{% endfor %}
}
