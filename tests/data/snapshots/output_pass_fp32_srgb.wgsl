// oidn_gpu.kernels.io_passes.generate_output_pass output-pass[transfer=srgb hdr=0 snorm=0 fp32 channels=3]

const WG_X: u32 = 8u;
const WG_Y: u32 = 8u;
const IN_BLOCKS: u32 = 1u;
const FLT_MAX: f32 = 3.4028235e38f;
const ONE_THIRD: f32 = 3.3333334e-1f;
const SRGB_A: f32 = 1.292e1f;
const SRGB_B: f32 = 1.055f;
const SRGB_C: f32 = 5.5e-2f;
const SRGB_Y0: f32 = 3.1308e-3f;
const SRGB_X0: f32 = 4.045e-2f;
const SRGB_EXPONENT: f32 = 4.1666666e-1f;
const SRGB_INV_EXPONENT: f32 = 2.4f;

struct Params {
  tensor_width: u32,
  src_y: u32,
  src_x: u32,
  dst_y: u32,
  dst_x: u32,
  height: u32,
  width: u32,
  out_offset: u32,
  out_pixel_stride: u32,
  out_row_stride: u32,
  out_channels: u32,
}

struct Frame {
  input_scale: f32,
  output_scale: f32,
}

@group(0) @binding(0) var<storage, read> input: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;
@group(0) @binding(2) var<uniform> params: Params;
@group(0) @binding(3) var<uniform> frame: Frame;

// Sanitize one value: NaN -> 0, -Inf -> lo, +Inf -> hi, then clamp to [lo, hi].
// NaN/Inf are detected from the bits, so no fast-math assumption can drop the test.
fn sanitize(v: f32, lo: f32, hi: f32) -> f32 {
  let bits = bitcast<u32>(v);
  let magnitude = bits & 0x7fffffffu;
  if (magnitude > 0x7f800000u) {
    return 0.0;
  }
  if (magnitude == 0x7f800000u) {
    return select(hi, lo, (bits >> 31u) != 0u);
  }
  return clamp(v, lo, hi);
}

fn sanitize3(v: vec3<f32>, lo: f32, hi: f32) -> vec3<f32> {
  return vec3<f32>(sanitize(v.x, lo, hi), sanitize(v.y, lo, hi), sanitize(v.z, lo, hi));
}

// sRGB transfer (OIDN core/color.h), not normalized.
fn transfer_forward(y: f32) -> f32 {
  if (y <= SRGB_Y0) {
    return SRGB_A * y;
  }
  return SRGB_B * pow(y, SRGB_EXPONENT) - SRGB_C;
}

fn transfer_inverse(x: f32) -> f32 {
  if (x <= SRGB_X0) {
    return x / SRGB_A;
  }
  return pow((x + SRGB_C) / SRGB_B, SRGB_INV_EXPONENT);
}

fn transfer_forward3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_forward(v.x), transfer_forward(v.y), transfer_forward(v.z));
}

fn transfer_inverse3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_inverse(v.x), transfer_inverse(v.y), transfer_inverse(v.z));
}

// Kept pixel (y, x) of a height x width rectangle: network output at tensor pixel
// (src_y + y, src_x + x) -> image pixel (dst_y + y, dst_x + x), first out_channels values.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.width || gid.y >= params.height) {
    return;
  }
  let t = ((params.src_y + gid.y) * params.tensor_width + params.src_x + gid.x) * IN_BLOCKS;
  let net = vec4<f32>(input[min(t, arrayLength(&input) - 1u)]).xyz;
  var v = transfer_inverse3(sanitize3(net, 0.0, FLT_MAX));
  if (params.out_channels == 1u) {
    v = vec3<f32>((v.x + v.y + v.z) * ONE_THIRD);
  }
  v = min(v, vec3<f32>(1.0));
  v = v * frame.output_scale;
  let base = params.out_offset + (params.dst_y + gid.y) * params.out_row_stride
    + (params.dst_x + gid.x) * params.out_pixel_stride;
  let last = arrayLength(&output) - 1u;
  output[min(base, last)] = v.x;
  if (params.out_channels >= 2u) {
    output[min(base + 1u, last)] = v.y;
  }
  if (params.out_channels >= 3u) {
    output[min(base + 2u, last)] = v.z;
  }
}
