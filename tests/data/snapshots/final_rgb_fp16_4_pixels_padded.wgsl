// oidn_gpu.kernels.final_rgb conv-final-rgb[in=32 out=3 fp16 out_fp32 linear weights=shared pixels=4 patch=padded]
enable f16;

const WG: u32 = 8u;
const PATCH: u32 = 10u;
const THREADS: u32 = 64u;
const IN_BLOCKS: u32 = 8u;
const OUT_BLOCKS: u32 = 1u;
const PATCH_SIZE: u32 = 3120u;
const PIXELS: u32 = 4u;
const TILE_W: u32 = 32u;
const PATCH_W: u32 = 34u;
const PIXEL_STRIDE: u32 = 9u;
const ROW_STRIDE: u32 = 312u;
const PATCH_ELEMENTS: u32 = 2720u;
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

// The PATCH_W x PATCH input halo patch of this workgroup's TILE_W x WG pixels: pixel
// (row, col)'s IN_BLOCKS blocks from element row * ROW_STRIDE + col * PIXEL_STRIDE.
// Unused elements between pixels and rows spread neighbouring ones over the banks.
var<workgroup> halo: array<vec4<f16>, PATCH_SIZE>;
// The 9 x IN_BLOCKS x 4 weight vec4s of this workgroup's output block.
var<workgroup> weight_cache: array<vec4<f16>, WEIGHT_CACHE_SIZE>;

// Patch element li: pixel (li / IN_BLOCKS) of the patch, block li % IN_BLOCKS; zero outside.
fn load_patch(li: u32, x0: u32, y0: u32, conv_h: u32, conv_w: u32) -> vec4<f16> {
  let pp = li / IN_BLOCKS;
  let ib = li % IN_BLOCKS;
  let ix = i32(x0 + pp % PATCH_W) - 1;
  let iy = i32(y0 + pp / PATCH_W) - 1;
  var v = vec4<f16>();
  if (ix >= 0 && iy >= 0 && ix < i32(conv_w) && iy < i32(conv_h)) {
    if (ib < SRC0_END) {
      v = input0[(u32(iy) * conv_w + u32(ix)) * SRC0_BLOCKS + ib - SRC0_OFFSET];
    }
  }
  return v;
}

// acc += W * v for the 4 weight vec4s w0..w3 of one (tap, input block), loaded once for
// every pixel of the invocation: `accumulate`'s operations in its order, so the same bits.
fn accumulate_loaded(
  acc: vec4<f32>,
  v: vec4<f16>,
  w0: vec4<f16>,
  w1: vec4<f16>,
  w2: vec4<f16>,
  w3: vec4<f16>,
) -> vec4<f32> {
  var p = w0 * v.x;
  p = fma(w1, vec4<f16>(v.y), p);
  p = fma(w2, vec4<f16>(v.z), p);
  p = fma(w3, vec4<f16>(v.w), p);
  return acc + vec4<f32>(p);
}

@compute @workgroup_size(WG, WG, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = wid.z;
  let x0 = wid.x * TILE_W;
  let y0 = wid.y * WG;
  let local_linear = lid.y * WG + lid.x;
  for (var li = local_linear; li < PATCH_ELEMENTS; li += THREADS) {
    let pp = li / IN_BLOCKS;
    let slot = (pp / PATCH_W) * ROW_STRIDE + (pp % PATCH_W) * PIXEL_STRIDE + li % IN_BLOCKS;
    halo[slot] = load_patch(li, x0, y0, out_h, out_w);
  }
  let weight_base = ob * WEIGHT_CACHE_SIZE;
  for (var li = local_linear; li < WEIGHT_CACHE_SIZE; li += THREADS) {
    weight_cache[li] = weights[weight_base + li];
  }
  workgroupBarrier();

  // This invocation's pixels: (ox + WG * p, oy) for p < PIXELS.
  let ox = x0 + lid.x;
  let oy = y0 + lid.y;
  if (ox >= out_w || oy >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
  var acc0 = bias[ob];
  var acc1 = bias[ob];
  var acc2 = bias[ob];
  var acc3 = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    for (var kx = 0u; kx < 3u; kx++) {
      let tap = ky * 3u + kx;
      let pb = (lid.y + ky) * ROW_STRIDE + (lid.x + kx) * PIXEL_STRIDE;
      for (var ib = 0u; ib < IN_BLOCKS; ib++) {
        let w = (tap * IN_BLOCKS + ib) * 4u;
        let w0 = weight_at(w);
        let w1 = weight_at(w + 1u);
        let w2 = weight_at(w + 2u);
        let w3 = weight_at(w + 3u);
        acc0 = accumulate_loaded(acc0, halo[pb + ib], w0, w1, w2, w3);
        acc1 = accumulate_loaded(acc1, halo[pb + 72u + ib], w0, w1, w2, w3);
        acc2 = accumulate_loaded(acc2, halo[pb + 144u + ib], w0, w1, w2, w3);
        acc3 = accumulate_loaded(acc3, halo[pb + 216u + ib], w0, w1, w2, w3);
      }
    }
  }
  output[(oy * out_w + ox) * OUT_BLOCKS + ob] = to_output(activate(acc0));
  if (ox + 8u < out_w) {
    output[(oy * out_w + ox + 8u) * OUT_BLOCKS + ob] = to_output(activate(acc1));
  }
  if (ox + 16u < out_w) {
    output[(oy * out_w + ox + 16u) * OUT_BLOCKS + ob] = to_output(activate(acc2));
  }
  if (ox + 24u < out_w) {
    output[(oy * out_w + ox + 24u) * OUT_BLOCKS + ob] = to_output(activate(acc3));
  }
}
