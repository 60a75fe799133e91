// oidn_gpu.kernels.final_rgb conv-final-rgb[in=32 out=3 fp16 out_fp32 linear weights=shared]
enable f16;

const WG: u32 = 8u;
const PATCH: u32 = 10u;
const THREADS: u32 = 64u;
const IN_BLOCKS: u32 = 8u;
const OUT_BLOCKS: u32 = 1u;
const PATCH_SIZE: u32 = 800u;
const WEIGHT_CACHE_SIZE: u32 = 288u;
const SRC0_BLOCKS: u32 = 8u;
const SRC0_OFFSET: u32 = 0u;
const SRC0_END: u32 = 8u;

struct Params {
  height: u32,
  width: u32,
}

@group(0) @binding(0) var<storage, read> input0: array<vec4<f16>>;
@group(0) @binding(1) var<storage, read> weights: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> bias: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> output: array<vec4<f32>>;
@group(0) @binding(4) var<uniform> params: Params;

// Index of the first of the 4 weight vec4s (input lanes 0..3) of output block
// `ob`, tap `tap` (ky * 3 + kx) and input block `ib` (concatenated over sources).
fn weight_index(ob: u32, tap: u32, ib: u32) -> u32 {
  return ((ob * 9u + tap) * IN_BLOCKS + ib) * 4u;
}

// Weight vec4 i.
fn weight_at(i: u32) -> vec4<f16> {
  return weight_cache[i];
}

// acc += W[w..w+3] * v: one input vec4 against 4 weight vec4s (output lanes).
// f16 products summed in a 4-term f16 partial, folded into the f32 accumulator.
fn accumulate(acc: vec4<f32>, v: vec4<f16>, w: u32) -> vec4<f32> {
  var p = weight_at(w) * v.x;
  p = fma(weight_at(w + 1u), vec4<f16>(v.y), p);
  p = fma(weight_at(w + 2u), vec4<f16>(v.z), p);
  p = fma(weight_at(w + 3u), vec4<f16>(v.w), p);
  return acc + vec4<f32>(p);
}

// Bias is already in the accumulator; apply the activation.
fn activate(v: vec4<f32>) -> vec4<f32> {
  return v;
}

// Convert to the output storage type (vec4<f32>).
fn to_output(v: vec4<f32>) -> vec4<f32> {
  return v;
}

// The (WG + 2) x (WG + 2) input halo patch of this workgroup, all IN_BLOCKS blocks.
var<workgroup> halo: array<vec4<f16>, PATCH_SIZE>;
// The 9 x IN_BLOCKS x 4 weight vec4s of this workgroup's output block.
var<workgroup> weight_cache: array<vec4<f16>, WEIGHT_CACHE_SIZE>;

// Patch element li: pixel (li / IN_BLOCKS) of the patch, block li % IN_BLOCKS; zero outside.
fn load_patch(li: u32, x0: u32, y0: u32, conv_h: u32, conv_w: u32) -> vec4<f16> {
  let pp = li / IN_BLOCKS;
  let ib = li % IN_BLOCKS;
  let ix = i32(x0 + pp % PATCH) - 1;
  let iy = i32(y0 + pp / PATCH) - 1;
  var v = vec4<f16>();
  if (ix >= 0 && iy >= 0 && ix < i32(conv_w) && iy < i32(conv_h)) {
    if (ib < SRC0_END) {
      v = input0[(u32(iy) * conv_w + u32(ix)) * SRC0_BLOCKS + ib - SRC0_OFFSET];
    }
  }
  return v;
}

@compute @workgroup_size(WG, WG, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = wid.z;
  let x0 = wid.x * WG;
  let y0 = wid.y * WG;
  let local_linear = lid.y * WG + lid.x;
  for (var li = local_linear; li < PATCH_SIZE; li += THREADS) {
    halo[li] = load_patch(li, x0, y0, out_h, out_w);
  }
  let weight_base = ob * WEIGHT_CACHE_SIZE;
  for (var li = local_linear; li < WEIGHT_CACHE_SIZE; li += THREADS) {
    weight_cache[li] = weights[weight_base + li];
  }
  workgroupBarrier();

  let ox = x0 + lid.x;
  let oy = y0 + lid.y;
  if (ox >= out_w || oy >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
  var acc = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    for (var kx = 0u; kx < 3u; kx++) {
      let tap = ky * 3u + kx;
      let pb = ((lid.y + ky) * PATCH + lid.x + kx) * IN_BLOCKS;
      for (var ib = 0u; ib < IN_BLOCKS; ib++) {
        acc = accumulate(acc, halo[pb + ib], (tap * IN_BLOCKS + ib) * 4u);
      }
    }
  }
  output[(oy * out_w + ox) * OUT_BLOCKS + ob] = to_output(activate(acc));
}
