{% include "bindings.wgsl" %}

var<workgroup> sums: array<f32, WG_SIZE>;
var<workgroup> counts: array<u32, WG_SIZE>;

{% include "autoexposure_tree.wgsl" %}

// The sum of the tree below `root`, in the same order, with an explicit stack.
fn subtree(root: vec4<u32>) -> vec2<f32> {
  var ranges: array<vec4<u32>, STACK>;
  var phase: array<u32, STACK>;
  var left: array<vec2<f32>, STACK>;
  var top = 0u;
  ranges[0] = root;
  phase[0] = 0u;
  var value = vec2<f32>(0.0, 0.0);
  loop {
    let r = ranges[top];
    let split = (r.y - r.x) * (r.w - r.z) > 1u;
    if (phase[top] == 0u && split) {
      phase[top] = 1u;
      ranges[top + 1u] = child(r, false);
      phase[top + 1u] = 0u;
      top = top + 1u;
      continue;
    }
    if (phase[top] == 1u) {
      left[top] = value;
      phase[top] = 2u;
      ranges[top + 1u] = child(r, true);
      phase[top + 1u] = 0u;
      top = top + 1u;
      continue;
    }
    if (phase[top] == 0u) {
      value = leaf(r);
    } else {
      value = vec2<f32>(left[top].x + value.x, left[top].y + value.y);
    }
    if (top == 0u) {
      break;
    }
    top = top - 1u;
  }
  return value;
}

// One workgroup: invocation t sums the tree node reached from the whole grid by the LEVELS
// bits of t (most significant first: 0 left, 1 right); the nodes then combine pairwise up
// the same tree. Invocation 0 writes OIDN's scale KEY / 2^(sum / count) (1 when no bin
// counts; 0 when the mean is not finite) and the output scale 1 / s (0 when s is 0).
@compute @workgroup_size(WG_SIZE, 1, 1)
fn main(@builtin(local_invocation_index) index: u32) {
  var node = vec4<u32>(0u, params.bins_h, 0u, params.bins_w);
  for (var level = 0u; level < LEVELS; level = level + 1u) {
    let bit = (index >> (LEVELS - 1u - level)) & 1u;
    node = child(node, bit == 1u);
  }
  let value = subtree(node);
  sums[index] = value.x;
  counts[index] = u32(value.y);
  workgroupBarrier();
{% for stride in strides %}
  if ((index & {{ 2 * stride - 1 }}u) == 0u) {
    sums[index] = sums[index] + sums[index + {{ stride }}u];
    counts[index] = counts[index] + counts[index + {{ stride }}u];
  }
  workgroupBarrier();
{% endfor %}
  if (index == 0u) {
    write_scale(sums[0], counts[0]);
  }
}
