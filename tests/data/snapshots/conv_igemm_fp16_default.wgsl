// oidn_gpu.kernels.conv_igemm conv-igemm[in=32 out=64 fp16 out_fp16 relu tile_policy=output-aligned decoder_load=per-load pool_layout=channels shared_layout=None accumulation_order=k-major final_layer=shared-auto load_mode=native address_mode=incremental weight_layout=k-major rows_per_thread=8 workgroup_size=8x8 cols_per_thread=1 k_tile=8 shared_load=block prefetch=none final_pixels=1 final_patch=linear accumulation=f32 tile=16x8x8x1k8p]
enable f16;

const WG_X: u32 = 16u;
const WG_Y: u32 = 8u;
const ROWS: u32 = 8u;
const TILE_M: u32 = 64u;
const TILE_N: u32 = 16u;
const K_TILE: u32 = 8u;
const IN_BLOCKS: u32 = 8u;
const OUT_BLOCKS: u32 = 16u;
const COLS: u32 = 1u;
const TOTAL_K: u32 = 72u;
const INPUT_TILE_SIZE: u32 = 520u;
const WEIGHT_TILE_SIZE: u32 = 512u;
const INPUT_ARRAY_SIZE: u32 = 520u;
const WEIGHT_ARRAY_SIZE: u32 = 512u;
const ROW_GROUP: u32 = 64u;
const INPUT_ROW_STRIDE: u32 = 65u;
const W_STRIDE: u32 = 4u;
const K_ADVANCE_BLOCKS: u32 = 0u;
const K_ADVANCE_TAPS: u32 = 1u;
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
@group(0) @binding(3) var<storage, read_write> output: array<vec4<f16>>;
@group(0) @binding(4) var<uniform> params: Params;

// Bias is already in the accumulator; apply the activation.
fn activate(v: vec4<f32>) -> vec4<f32> {
  return max(v, vec4<f32>(0.0));
}

// Convert to the output storage type (vec4<f16>).
fn to_output(v: vec4<f32>) -> vec4<f16> {
  // saturate to the largest half so overflow never produces Inf
  return vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

// Shared tiles: TILE_M GEMM rows x K_TILE input blocks, and K_TILE x TILE_N x 4 weight vec4s.
var<workgroup> input_tile: array<vec4<f16>, INPUT_ARRAY_SIZE>;
var<workgroup> weight_tile: array<vec4<f16>, WEIGHT_ARRAY_SIZE>;

// Source 0 at conv-resolution pixel (iy, ix), block b.
fn fetch0(iy: u32, ix: u32, b: u32, conv_w: u32) -> vec4<f16> {
  let index = (iy * conv_w + ix) * SRC0_BLOCKS + b;
  return input0[index];
}

fn fetch_weight(index: u32) -> vec4<f16> {
  return weights[index];
}

// Conv-resolution pixel of GEMM row m, as vec2(x, y).
fn row_pixel(m: u32, out_w: u32, conv_w: u32) -> vec2<u32> {
  return vec2<u32>(m % conv_w, m / conv_w);
}

// Bit ky * 3 + kx is set when tap (ky, kx) of pixel (y, x) lies inside [conv_h, conv_w].
fn tap_mask(y: u32, x: u32, conv_h: u32, conv_w: u32) -> u32 {
  let cols = select(0u, 0x049u, x > 0u) | 0x092u | select(0u, 0x124u, x + 1u < conv_w);
  let rows = select(0u, 0x007u, y > 0u) | 0x038u | select(0u, 0x1c0u, y + 1u < conv_h);
  return cols & rows;
}

// Shared index of input load index li (one hole per thread row group when padded).
fn input_slot(li: u32) -> u32 {
  return li + li / ROW_GROUP;
}

// Shared index of weight load index li (one hole per 4 vec4s when padded).
fn weight_slot(li: u32) -> u32 {
  return li;
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let conv_h = out_h;
  let conv_w = out_w;
  let row_count = conv_h * conv_w;
  let tile_m = (wid.x + wid.z * nwg.x) * TILE_M;
  let col_tile = wid.y;
  // Column c of this invocation is output block ob0 + c * WG_X.
  let ob0 = col_tile * TILE_N + lid.x;
  let local_linear = lid.y * WG_X + lid.x;
  // Every input load of this invocation has the same K lane; loads differ by SLOT_STRIDE rows.
  let k_lane = local_linear % K_TILE;
  let m_base = tile_m + local_linear / K_TILE;

  let b0 = bias[min(ob0 + 0u, OUT_BLOCKS - 1u)];
  var acc0_0 = b0;
  var acc1_0 = b0;
  var acc2_0 = b0;
  var acc3_0 = b0;
  var acc4_0 = b0;
  var acc5_0 = b0;
  var acc6_0 = b0;
  var acc7_0 = b0;

  // Per-load pixel and tap mask (0 for rows past the end), computed once.
  let m0 = m_base + 0u;
  let pix0 = row_pixel(m0, out_w, conv_w);
  let mask0 = select(0u, tap_mask(pix0.y, pix0.x, conv_h, conv_w), m0 < row_count);
  let m1 = m_base + 16u;
  let pix1 = row_pixel(m1, out_w, conv_w);
  let mask1 = select(0u, tap_mask(pix1.y, pix1.x, conv_h, conv_w), m1 < row_count);
  let m2 = m_base + 32u;
  let pix2 = row_pixel(m2, out_w, conv_w);
  let mask2 = select(0u, tap_mask(pix2.y, pix2.x, conv_h, conv_w), m2 < row_count);
  let m3 = m_base + 48u;
  let pix3 = row_pixel(m3, out_w, conv_w);
  let mask3 = select(0u, tap_mask(pix3.y, pix3.x, conv_h, conv_w), m3 < row_count);
  var channel_block = k_lane % IN_BLOCKS;
  var filter_position = k_lane / IN_BLOCKS;

  for (var k_base = 0u; k_base < TOTAL_K; k_base += K_TILE) {
    var in0 = vec4<f16>();
    var in1 = vec4<f16>();
    var in2 = vec4<f16>();
    var in3 = vec4<f16>();
    var wt0 = vec4<f16>();
    var wt1 = vec4<f16>();
    var wt2 = vec4<f16>();
    var wt3 = vec4<f16>();
    // global loads of the K tile at k_base into registers (zeros outside the tensor)
    {
      let tap = filter_position;
      let ib = channel_block;
      let k_ok = tap < 9u;
      {
        let pix = pix0;
        let ok = k_ok && ((mask0 >> tap) & 1u) != 0u;
        var v = vec4<f16>();
        if (ok) {
          if (ib < SRC0_END) {
            v = fetch0(pix.y + tap / 3u - 1u, pix.x + tap % 3u - 1u, ib - SRC0_OFFSET, conv_w);
          }
        }
        in0 = v;
      }
      {
        let pix = pix1;
        let ok = k_ok && ((mask1 >> tap) & 1u) != 0u;
        var v = vec4<f16>();
        if (ok) {
          if (ib < SRC0_END) {
            v = fetch0(pix.y + tap / 3u - 1u, pix.x + tap % 3u - 1u, ib - SRC0_OFFSET, conv_w);
          }
        }
        in1 = v;
      }
      {
        let pix = pix2;
        let ok = k_ok && ((mask2 >> tap) & 1u) != 0u;
        var v = vec4<f16>();
        if (ok) {
          if (ib < SRC0_END) {
            v = fetch0(pix.y + tap / 3u - 1u, pix.x + tap % 3u - 1u, ib - SRC0_OFFSET, conv_w);
          }
        }
        in2 = v;
      }
      {
        let pix = pix3;
        let ok = k_ok && ((mask3 >> tap) & 1u) != 0u;
        var v = vec4<f16>();
        if (ok) {
          if (ib < SRC0_END) {
            v = fetch0(pix.y + tap / 3u - 1u, pix.x + tap % 3u - 1u, ib - SRC0_OFFSET, conv_w);
          }
        }
        in3 = v;
      }
      {
        let li = local_linear + 0u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = k_base + tk;
        var w = vec4<f16>();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight((wk * OUT_BLOCKS + wob) * 4u + rem % 4u);
        }
        wt0 = w;
      }
      {
        let li = local_linear + 128u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = k_base + tk;
        var w = vec4<f16>();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight((wk * OUT_BLOCKS + wob) * 4u + rem % 4u);
        }
        wt1 = w;
      }
      {
        let li = local_linear + 256u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = k_base + tk;
        var w = vec4<f16>();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight((wk * OUT_BLOCKS + wob) * 4u + rem % 4u);
        }
        wt2 = w;
      }
      {
        let li = local_linear + 384u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = k_base + tk;
        var w = vec4<f16>();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight((wk * OUT_BLOCKS + wob) * 4u + rem % 4u);
        }
        wt3 = w;
      }
    }
    input_tile[input_slot(local_linear + 0u)] = in0;
    input_tile[input_slot(local_linear + 128u)] = in1;
    input_tile[input_slot(local_linear + 256u)] = in2;
    input_tile[input_slot(local_linear + 384u)] = in3;
    weight_tile[weight_slot(local_linear + 0u)] = wt0;
    weight_tile[weight_slot(local_linear + 128u)] = wt1;
    weight_tile[weight_slot(local_linear + 256u)] = wt2;
    weight_tile[weight_slot(local_linear + 384u)] = wt3;
    workgroupBarrier();

    let row_base = lid.y * INPUT_ROW_STRIDE;
    {
      {
        let wb0 = (0u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 0u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 8u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 16u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 24u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 32u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 40u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 48u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 56u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (1u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 1u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 9u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 17u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 25u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 33u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 41u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 49u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 57u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (2u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 2u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 10u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 18u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 26u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 34u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 42u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 50u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 58u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (3u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 3u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 11u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 19u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 27u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 35u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 43u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 51u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 59u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (4u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 4u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 12u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 20u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 28u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 36u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 44u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 52u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 60u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (5u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 5u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 13u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 21u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 29u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 37u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 45u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 53u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 61u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (6u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 6u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 14u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 22u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 30u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 38u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 46u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 54u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 62u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
      {
        let wb0 = (7u * TILE_N + lid.x + 0u) * W_STRIDE;
        let w0_0 = vec4<f32>(weight_tile[wb0]);
        let w0_1 = vec4<f32>(weight_tile[wb0 + 1u]);
        let w0_2 = vec4<f32>(weight_tile[wb0 + 2u]);
        let w0_3 = vec4<f32>(weight_tile[wb0 + 3u]);
        let v0 = vec4<f32>(input_tile[row_base + 7u]);
        acc0_0 = fma(w0_0, vec4<f32>(v0.x), acc0_0);
        acc0_0 = fma(w0_1, vec4<f32>(v0.y), acc0_0);
        acc0_0 = fma(w0_2, vec4<f32>(v0.z), acc0_0);
        acc0_0 = fma(w0_3, vec4<f32>(v0.w), acc0_0);
        let v1 = vec4<f32>(input_tile[row_base + 15u]);
        acc1_0 = fma(w0_0, vec4<f32>(v1.x), acc1_0);
        acc1_0 = fma(w0_1, vec4<f32>(v1.y), acc1_0);
        acc1_0 = fma(w0_2, vec4<f32>(v1.z), acc1_0);
        acc1_0 = fma(w0_3, vec4<f32>(v1.w), acc1_0);
        let v2 = vec4<f32>(input_tile[row_base + 23u]);
        acc2_0 = fma(w0_0, vec4<f32>(v2.x), acc2_0);
        acc2_0 = fma(w0_1, vec4<f32>(v2.y), acc2_0);
        acc2_0 = fma(w0_2, vec4<f32>(v2.z), acc2_0);
        acc2_0 = fma(w0_3, vec4<f32>(v2.w), acc2_0);
        let v3 = vec4<f32>(input_tile[row_base + 31u]);
        acc3_0 = fma(w0_0, vec4<f32>(v3.x), acc3_0);
        acc3_0 = fma(w0_1, vec4<f32>(v3.y), acc3_0);
        acc3_0 = fma(w0_2, vec4<f32>(v3.z), acc3_0);
        acc3_0 = fma(w0_3, vec4<f32>(v3.w), acc3_0);
        let v4 = vec4<f32>(input_tile[row_base + 39u]);
        acc4_0 = fma(w0_0, vec4<f32>(v4.x), acc4_0);
        acc4_0 = fma(w0_1, vec4<f32>(v4.y), acc4_0);
        acc4_0 = fma(w0_2, vec4<f32>(v4.z), acc4_0);
        acc4_0 = fma(w0_3, vec4<f32>(v4.w), acc4_0);
        let v5 = vec4<f32>(input_tile[row_base + 47u]);
        acc5_0 = fma(w0_0, vec4<f32>(v5.x), acc5_0);
        acc5_0 = fma(w0_1, vec4<f32>(v5.y), acc5_0);
        acc5_0 = fma(w0_2, vec4<f32>(v5.z), acc5_0);
        acc5_0 = fma(w0_3, vec4<f32>(v5.w), acc5_0);
        let v6 = vec4<f32>(input_tile[row_base + 55u]);
        acc6_0 = fma(w0_0, vec4<f32>(v6.x), acc6_0);
        acc6_0 = fma(w0_1, vec4<f32>(v6.y), acc6_0);
        acc6_0 = fma(w0_2, vec4<f32>(v6.z), acc6_0);
        acc6_0 = fma(w0_3, vec4<f32>(v6.w), acc6_0);
        let v7 = vec4<f32>(input_tile[row_base + 63u]);
        acc7_0 = fma(w0_0, vec4<f32>(v7.x), acc7_0);
        acc7_0 = fma(w0_1, vec4<f32>(v7.y), acc7_0);
        acc7_0 = fma(w0_2, vec4<f32>(v7.z), acc7_0);
        acc7_0 = fma(w0_3, vec4<f32>(v7.w), acc7_0);
      }
    }
    workgroupBarrier();
    // advance this invocation's K lane by one K tile (at most one carry)
    channel_block += K_ADVANCE_BLOCKS;
    let carry = channel_block >= IN_BLOCKS;
    channel_block -= select(0u, IN_BLOCKS, carry);
    filter_position += K_ADVANCE_TAPS + select(0u, 1u, carry);
  }

  let row0 = tile_m + lid.y * ROWS;
  let out_ob0 = ob0 + 0u;
  if (out_ob0 < OUT_BLOCKS) {
    if (row0 + 0u < row_count) {
      output[(row0 + 0u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc0_0));
    }
    if (row0 + 1u < row_count) {
      output[(row0 + 1u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc1_0));
    }
    if (row0 + 2u < row_count) {
      output[(row0 + 2u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc2_0));
    }
    if (row0 + 3u < row_count) {
      output[(row0 + 3u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc3_0));
    }
    if (row0 + 4u < row_count) {
      output[(row0 + 4u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc4_0));
    }
    if (row0 + 5u < row_count) {
      output[(row0 + 5u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc5_0));
    }
    if (row0 + 6u < row_count) {
      output[(row0 + 6u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc6_0));
    }
    if (row0 + 7u < row_count) {
      output[(row0 + 7u) * OUT_BLOCKS + out_ob0] = to_output(activate(acc7_0));
    }
  }
}
