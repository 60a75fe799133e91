// oidn_gpu.kernels.conv_direct conv-direct[in=9 out=32 fp32 out_fp32 relu pool]

const WG_X: u32 = 8u;
const WG_Y: u32 = 8u;
const IN_BLOCKS: u32 = 3u;
const OUT_BLOCKS: u32 = 8u;
const SRC0_BLOCKS: u32 = 3u;
const SRC0_OFFSET: u32 = 0u;
const SRC0_END: u32 = 3u;

struct Params {
  height: u32,
  width: u32,
}

@group(0) @binding(0) var<storage, read> input0: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> weights: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> output: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

// Index of the first of the 4 weight vec4s (input lanes 0..3) of output block
// `ob`, tap `tap` (ky * 3 + kx) and input block `ib` (concatenated over sources).
fn weight_index(ob: u32, tap: u32, ib: u32) -> u32 {
  return ((ob * 9u + tap) * IN_BLOCKS + ib) * 4u;
}

// Weight vec4 i.
fn weight_at(i: u32) -> vec4<f32> {
  return weights[i];
}

// acc += W[w..w+3] * v: one input vec4 against 4 weight vec4s (output lanes).
fn accumulate(acc: vec4<f32>, v: vec4<f32>, w: u32) -> vec4<f32> {
  var a = fma(weight_at(w), vec4<f32>(v.x), acc);
  a = fma(weight_at(w + 1u), vec4<f32>(v.y), a);
  a = fma(weight_at(w + 2u), vec4<f32>(v.z), a);
  a = fma(weight_at(w + 3u), vec4<f32>(v.w), a);
  return a;
}

// Bias is already in the accumulator; apply the activation.
fn activate(v: vec4<f32>) -> vec4<f32> {
  return max(v, vec4<f32>(0.0));
}

// Convert to the output storage type (vec4<f32>).
fn to_output(v: vec4<f32>) -> vec4<f32> {
  return v;
}

// Pre-activation conv value (bias included) of output block `ob` at conv-resolution
// pixel (cy, cx) of a [*, conv_h, conv_w] conv. Taps outside the tensor are skipped.
fn conv_at(cy: u32, cx: u32, ob: u32, conv_h: u32, conv_w: u32) -> vec4<f32> {
  var acc = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    let iy = i32(cy) + i32(ky) - 1;
    if (iy < 0 || iy >= i32(conv_h)) {
      continue;
    }
    for (var kx = 0u; kx < 3u; kx++) {
      let ix = i32(cx) + i32(kx) - 1;
      if (ix < 0 || ix >= i32(conv_w)) {
        continue;
      }
      let tap = ky * 3u + kx;
      {
        // source 0
        let base = (u32(iy) * conv_w + u32(ix)) * SRC0_BLOCKS;
        for (var b = 0u; b < SRC0_BLOCKS; b++) {
          acc = accumulate(acc, input0[base + b], weight_index(ob, tap, SRC0_OFFSET + b));
        }
      }
    }
  }
  return acc;
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = gid.z;
  if (gid.x >= out_w || gid.y >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
  let conv_h = out_h * 2u;
  let conv_w = out_w * 2u;
  var result = activate(conv_at(gid.y * 2u, gid.x * 2u, ob, conv_h, conv_w));
  result = max(result, activate(conv_at(gid.y * 2u, gid.x * 2u + 1u, ob, conv_h, conv_w)));
  result = max(result, activate(conv_at(gid.y * 2u + 1u, gid.x * 2u, ob, conv_h, conv_w)));
  result = max(result, activate(conv_at(gid.y * 2u + 1u, gid.x * 2u + 1u, ob, conv_h, conv_w)));
  output[(gid.y * out_w + gid.x) * OUT_BLOCKS + ob] = to_output(result);
}
