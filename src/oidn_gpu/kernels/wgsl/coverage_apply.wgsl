// The second pass of an alpha's coverage fit: the guided filter of K. He, J. Sun and X. Tang,
// "Guided Image Filtering" (ECCV 2010), section 3, with the alpha as the filtered image and
// the albedo as the guide (`oidn_gpu.image.coverage`).
{% include "bindings.wgsl" %}

{% include "image_read.wgsl" %}

// The image's pixel (id.y, id.x) lies in the windows centred on the extended image's pixels
// (id.y .. id.y + 2 RADIUS, id.x .. id.x + 2 RADIUS): the means of their fits (a, b), summed
// by columns and then the columns from left to right (as `image.coverage` sums them),
// applied to the pixel's centred guide, give its fitted alpha mean(a) . g + mean(b) (clipped
// to 0..1 with `params.clip`).
@compute @workgroup_size(WG, WG, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  if (id.y >= params.height || id.x >= params.width) {
    return;
  }
  let ext_w = params.width + 2u * RADIUS;
  var sum = vec4<f32>(0.0);
  for (var dx = 0u; dx < SIDE; dx = dx + 1u) {
    var column = vec4<f32>(0.0);
    for (var dy = 0u; dy < SIDE; dy = dy + 1u) {
      column = column + ab[(id.y + dy) * ext_w + id.x + dx];
    }
    sum = sum + column;
  }
  let mean = sum * INV_COUNT;
  let v = read_guide(id.y, id.x) - vec3<f32>(CENTRE);
  let fit = mean.x * v.x + mean.y * v.y + mean.z * v.z + mean.w + CENTRE;
  fitted[id.y * params.width + id.x] = select(fit, clamp(fit, 0.0, 1.0), params.clip != 0u);
}
