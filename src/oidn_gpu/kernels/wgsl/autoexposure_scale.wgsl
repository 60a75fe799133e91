{% include "bindings.wgsl" %}

var<workgroup> sums: array<f32, WG_SIZE>;
var<workgroup> counts: array<u32, WG_SIZE>;
// The left sums still waiting for their right siblings in the tree above the chunks: one per
// level (a binary counter over the chunk index).
var<workgroup> pending: array<f32, PENDING>;

{% include "autoexposure_tree.wgsl" %}

// subtree_k: the (sum, count) of the complete tree of depth k below a node, left + right.
fn subtree_0(r: vec4<u32>) -> vec2<f32> {
  return leaf(r);
}
{% for k in subtree_levels %}
fn subtree_{{ k }}(r: vec4<u32>) -> vec2<f32> {
  let left = subtree_{{ k - 1 }}(child(r, false));
  let right = subtree_{{ k - 1 }}(child(r, true));
  return left + right;
}
{% endfor %}

// ceil(log2(n)) for n >= 1.
fn ceil_log2(n: u32) -> u32 {
  if (n <= 1u) {
    return 0u;
  }
  return 32u - countLeadingZeros(n - 1u);
}

// The tree is ceil(log2(bins_h)) + ceil(log2(bins_w)) levels deep (the larger half of every
// split on the way down); complete to `depth` levels, it splits into 2^(depth - LEVELS -
// THREAD_LEVELS) chunks, taken left to right. In a chunk, invocation t sums the depth
// THREAD_LEVELS subtree the chunk's path and the LEVELS bits of t name (in registers), then
// the 256 sums combine pairwise in workgroup memory; invocation 0 adds each chunk's sum into
// the tree above the chunks as a binary counter does. Invocation 0 then writes OIDN's scale
// KEY / 2^(sum / count) (1 when no bin counts; 0 when the mean is not finite) and the output
// scale 1 / s (0 when s is 0). The counts are integers: their order does not matter.
@compute @workgroup_size(WG_SIZE, 1, 1)
fn main(@builtin(local_invocation_index) index: u32) {
  let root = vec4<u32>(0u, params.bins_h, 0u, params.bins_w);
  let depth = max(ceil_log2(params.bins_h) + ceil_log2(params.bins_w), LEVELS + THREAD_LEVELS);
  let chunk_levels = depth - LEVELS - THREAD_LEVELS;
  let chunks = 1u << chunk_levels;
  var count = 0u;
  for (var chunk = 0u; chunk < chunks; chunk = chunk + 1u) {
    var node = root;
    for (var level = 0u; level < chunk_levels; level = level + 1u) {
      node = child(node, ((chunk >> (chunk_levels - 1u - level)) & 1u) == 1u);
    }
    for (var level = 0u; level < LEVELS; level = level + 1u) {
      node = child(node, ((index >> (LEVELS - 1u - level)) & 1u) == 1u);
    }
    let value = subtree_{{ thread_levels }}(node);
    count = count + u32(value.y);
    sums[index] = value.x;
    workgroupBarrier();
{% for stride in strides %}
    if ((index & {{ 2 * stride - 1 }}u) == 0u) {
      sums[index] = sums[index] + sums[index + {{ stride }}u];
    }
    workgroupBarrier();
{% endfor %}
    if (index == 0u) {
      var total = sums[0];
      var level = 0u;
      while (((chunk >> level) & 1u) == 1u) {
        total = pending[level] + total;
        level = level + 1u;
      }
      pending[level] = total;
    }
    workgroupBarrier();
  }
  counts[index] = count;
  workgroupBarrier();
{% for stride in strides %}
  if ((index & {{ 2 * stride - 1 }}u) == 0u) {
    counts[index] = counts[index] + counts[index + {{ stride }}u];
  }
  workgroupBarrier();
{% endfor %}
  if (index == 0u) {
    let sum = pending[chunk_levels];
    write_scale(sum, counts[0]);
  }
}
