{% include "bindings.wgsl" %}

// How many pixels kept their history in the reprojection (REPROJECTION_VALID > 0.5,
// oidn_gpu.temporal.passes.history_fraction's count): a sum per workgroup, then one atomic
// add into counter[0] (which the host zeroes before the frame).

var<workgroup> kept: atomic<u32>;

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(
  @builtin(global_invocation_id) id: vec3<u32>,
  @builtin(local_invocation_index) local: u32,
) {
  if (local == 0u) {
    atomicStore(&kept, 0u);
  }
  workgroupBarrier();
  if (id.x < params.width && id.y < params.height) {
    let p = id.y * params.width + id.x;
    if (reprojection[p * REPROJECTION_CHANNELS + REPROJECTION_VALID] > 0.5) {
      atomicAdd(&kept, 1u);
    }
  }
  workgroupBarrier();
  if (local == 0u) {
    let n = atomicLoad(&kept);
    if (n > 0u) {
      atomicAdd(&counter[0], n);
    }
  }
}
