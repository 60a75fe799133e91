{% include "bindings.wgsl" %}

{% include "transfer.wgsl" %}

{% include "image_read.wgsl" %}

var<workgroup> partial: array<f32, WG_SIZE>;

// Bin (workgroup_id.y, workgroup_id.x) covers rows [floor(i * H / bins_h), floor((i + 1) * H /
// bins_h)) and the same for columns (at most BIN x BIN pixels). Invocation (ly, lx) takes the
// luminance of the sanitized pixel (r0 + ly, c0 + lx) of the bin (0 outside it); a halving tree
// over the workgroup sums them, and invocation 0 stores the sum / the bin's pixel count.
@compute @workgroup_size(BIN, BIN, 1)
fn main(
  @builtin(workgroup_id) group: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(local_invocation_index) index: u32,
) {
  let r0 = (group.y * params.height) / params.bins_h;
  let r1 = ((group.y + 1u) * params.height) / params.bins_h;
  let c0 = (group.x * params.width) / params.bins_w;
  let c1 = ((group.x + 1u) * params.width) / params.bins_w;
  var lum = 0.0;
  if (r0 + lid.y < r1 && c0 + lid.x < c1) {
    let rgb = sanitize3(read_color(r0 + lid.y, c0 + lid.x), 0.0, FLT_MAX);
    lum = LUMINANCE_R * rgb.x + LUMINANCE_G * rgb.y + LUMINANCE_B * rgb.z;
  }
  partial[index] = lum;
  workgroupBarrier();
{% for stride in strides %}
  if (index < {{ stride }}u) {
    partial[index] = partial[index] + partial[index + {{ stride }}u];
  }
  workgroupBarrier();
{% endfor %}
  if (index == 0u) {
    let count = f32((r1 - r0) * (c1 - c0));
    bins[group.y * params.bins_w + group.x] = partial[0] / count;
  }
}
