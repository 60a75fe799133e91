{% include "bindings.wgsl" %}

// Pixel (y, x) of the blocked [CHANNELS, H, W] tensor becomes CHANNELS dense f32 values.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.width || gid.y >= params.height) {
    return;
  }
  let pixel = gid.y * params.width + gid.x;
  let src = pixel * IN_BLOCKS;
  let dst = pixel * CHANNELS;
{% for block in blocks %}
  {
    let v = vec4<f32>(input[src + {{ block.index }}u]);
{% for lane in block.lanes %}
    output[dst + {{ lane.channel }}u] = v.{{ lane.component }};
{% endfor %}
  }
{% endfor %}
}
