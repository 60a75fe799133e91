// oidn_gpu.kernels.pool max-pool[channels=64 fp16 layout=channels]
enable f16;

const WG_X: u32 = 8u;
const WG_Y: u32 = 8u;
const BLOCKS: u32 = 16u;

struct Params {
  height: u32,
  width: u32,
}

@group(0) @binding(0) var<storage, read> input: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read_write> output: array<vec4<f16>>;
@group(0) @binding(2) var<uniform> params: Params;

// 2x2 / stride 2 max pool: output pixel (ox, oy), block ob of the [C, H/2, W/2] output
// from the [C, H, W] input (H = 2 * params.height, W = 2 * params.width).
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(
  @builtin(global_invocation_id) gid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  // x and channel blocks share one linear index; wide rows continue in z
  let linear = gid.x + gid.z * nwg.x * WG_X;
  let ob = linear % BLOCKS;
  let ox = linear / BLOCKS;
  let oy = gid.y;
  if (ox >= out_w || oy >= out_h || ob >= BLOCKS) {
    return;
  }
  let in_w = out_w * 2u;
  let top = ((oy * 2u) * in_w + ox * 2u) * BLOCKS + ob;
  let bottom = top + in_w * BLOCKS;
  let m = max(max(input[top], input[top + BLOCKS]), max(input[bottom], input[bottom + BLOCKS]));
  output[(oy * out_w + ox) * BLOCKS + ob] = m;
}
