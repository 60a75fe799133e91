{% include "bindings.wgsl" %}

{% include "transfer.wgsl" %}

{% include "image_read.wgsl" %}

var<workgroup> partial: array<f32, WG_SIZE>;

// The luminance of the sanitized pixel (r0 + y, c0 + x) when it lies in the bin, else 0.
fn luminance(r0: u32, r1: u32, c0: u32, c1: u32, y: u32, x: u32) -> f32 {
  if (r0 + y < r1 && c0 + x < c1) {
    let rgb = sanitize3(read_color(r0 + y, c0 + x), 0.0, FLT_MAX);
    return LUMINANCE_R * rgb.x + LUMINANCE_G * rgb.y + LUMINANCE_B * rgb.z;
  }
  return 0.0;
}

// Bin (workgroup_id.y, workgroup_id.x) covers rows [floor(i * H / bins_h), floor((i + 1) * H /
// bins_h)) and the same for columns (at most BIN x BIN pixels). Its BIN x BIN luminances
// (0 outside the bin), pixel (y, x) at p = y * BIN + x, sum over a halving tree: at stride s
// (BIN * BIN / 2 down to 1), p += p + s for every p < s. Invocation (ly, lx) of the WG_SIZE
// takes the pixels p = ly * BIN + lx + k * WG_SIZE and does the tree's first strides (down to
// WG_SIZE) in registers, in the same order; the rest runs in workgroup memory, and
// invocation 0 stores the sum / the bin's pixel count.
@compute @workgroup_size(BIN, WG_SIZE / BIN, 1)
fn main(
  @builtin(workgroup_id) group: vec3<u32>,
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(local_invocation_index) index: u32,
) {
  let r0 = (group.y * params.height) / params.bins_h;
  let r1 = ((group.y + 1u) * params.height) / params.bins_h;
  let c0 = (group.x * params.width) / params.bins_w;
  let c1 = ((group.x + 1u) * params.width) / params.bins_w;
{% for k in pixel_steps %}
  let p{{ k }} = luminance(r0, r1, c0, c1, lid.y + {{ k * rows_per_step }}u, lid.x);
{% endfor %}
  partial[index] = {{ register_sum }};
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
