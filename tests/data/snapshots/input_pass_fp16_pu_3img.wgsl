// oidn_gpu.kernels.io_passes.generate_input_pass input-pass[images=main+albedo+normal fp16 transfer=pu hdr=1 snorm=0]
enable f16;

const WG_X: u32 = 8u;
const WG_Y: u32 = 8u;
const CHANNELS: u32 = 9u;
const OUT_BLOCKS: u32 = 3u;
const FLT_MAX: f32 = 3.4028235e38f;
const MAIN_LO: f32 = 0.0f;
const MAIN_HI: f32 = 3.4028235e38f;
const PU_A: f32 = 1.4128376e3f;
const PU_B: f32 = 1.6459317f;
const PU_C: f32 = 4.3138498e-1f;
const PU_D: f32 = -2.941396e-3f;
const PU_E: f32 = 1.9265325e-1f;
const PU_F: f32 = 6.260261e-3f;
const PU_G: f32 = 9.9862015e-1f;
const PU_Y0: f32 = 1.5794576e-6f;
const PU_Y1: f32 = 3.2208763e-2f;
const PU_X0: f32 = 2.231517e-3f;
const PU_X1: f32 = 3.7097475e-1f;
const PU_INV_C: f32 = 2.318115f;
const NORM_SCALE: f32 = 3.1896716e-1f;
const RCP_NORM_SCALE: f32 = 3.135119f;

struct Params {
  tensor_height: u32,
  tensor_width: u32,
  dst_y: u32,
  dst_x: u32,
  src_y: u32,
  src_x: u32,
  copy_height: u32,
  copy_width: u32,
  main_offset: u32,
  main_pixel_stride: u32,
  main_row_stride: u32,
  main_channels: u32,
  albedo_offset: u32,
  albedo_pixel_stride: u32,
  albedo_row_stride: u32,
  albedo_channels: u32,
  normal_offset: u32,
  normal_pixel_stride: u32,
  normal_row_stride: u32,
  normal_channels: u32,
}

struct Frame {
  input_scale: f32,
  output_scale: f32,
}

@group(0) @binding(0) var<storage, read> main_image: array<f32>;
@group(0) @binding(1) var<storage, read> albedo_image: array<f32>;
@group(0) @binding(2) var<storage, read> normal_image: array<f32>;
@group(0) @binding(3) var<storage, read_write> output: array<vec4<f16>>;
@group(0) @binding(4) var<uniform> params: Params;
@group(0) @binding(5) var<uniform> frame: Frame;

// Convert to the output storage type (vec4<f16>).
fn to_output(v: vec4<f32>) -> vec4<f16> {
  // saturate to the largest half so overflow never produces Inf
  return vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

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

// PU transfer (OIDN core/color.h), normalized by NORM_SCALE / RCP_NORM_SCALE.
fn transfer_forward(y: f32) -> f32 {
  var x: f32;
  if (y <= PU_Y0) {
    x = PU_A * y;
  } else if (y <= PU_Y1) {
    x = PU_B * pow(y, PU_C) + PU_D;
  } else {
    x = PU_E * log(y + PU_F) + PU_G;
  }
  return x * NORM_SCALE;
}

fn transfer_inverse(v: f32) -> f32 {
  let x = v * RCP_NORM_SCALE;
  if (x <= PU_X0) {
    return x / PU_A;
  } else if (x <= PU_X1) {
    return pow((x - PU_D) / PU_B, PU_INV_C);
  }
  return exp((x - PU_G) / PU_E) - PU_F;
}

fn transfer_forward3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_forward(v.x), transfer_forward(v.y), transfer_forward(v.z));
}

fn transfer_inverse3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_inverse(v.x), transfer_inverse(v.y), transfer_inverse(v.z));
}

// Element e of an image buffer as f32: `array<f32>`, or float16 pairs packed in `array<u32>`
// (element e is half e % 2 of word e / 2, widened exactly). Indices clamp to the buffer.
fn load_main(e: u32) -> f32 {
  return main_image[min(e, arrayLength(&main_image) - 1u)];
}

// Pixel (y, x) as 3 values, broadcasting C = 1 (p0, p0, p0) and C = 2 (p0, p1, p1).
fn read_main(y: u32, x: u32) -> vec3<f32> {
  let base = params.main_offset + y * params.main_row_stride
    + x * params.main_pixel_stride;
  let c1 = min(1u, params.main_channels - 1u);
  let c2 = min(2u, params.main_channels - 1u);
  return vec3<f32>(
    load_main(base),
    load_main(base + c1),
    load_main(base + c2),
  );
}

fn load_albedo(e: u32) -> f32 {
  return albedo_image[min(e, arrayLength(&albedo_image) - 1u)];
}

// Pixel (y, x) as 3 values, broadcasting C = 1 (p0, p0, p0) and C = 2 (p0, p1, p1).
fn read_albedo(y: u32, x: u32) -> vec3<f32> {
  let base = params.albedo_offset + y * params.albedo_row_stride
    + x * params.albedo_pixel_stride;
  let c1 = min(1u, params.albedo_channels - 1u);
  let c2 = min(2u, params.albedo_channels - 1u);
  return vec3<f32>(
    load_albedo(base),
    load_albedo(base + c1),
    load_albedo(base + c2),
  );
}

fn load_normal(e: u32) -> f32 {
  return normal_image[min(e, arrayLength(&normal_image) - 1u)];
}

// Pixel (y, x) as 3 values, broadcasting C = 1 (p0, p0, p0) and C = 2 (p0, p1, p1).
fn read_normal(y: u32, x: u32) -> vec3<f32> {
  let base = params.normal_offset + y * params.normal_row_stride
    + x * params.normal_pixel_stride;
  let c1 = min(1u, params.normal_channels - 1u);
  let c2 = min(2u, params.normal_channels - 1u);
  return vec3<f32>(
    load_normal(base),
    load_normal(base + c1),
    load_normal(base + c2),
  );
}

// Tensor pixel (ty, tx) of the [CHANNELS, tensor_height, tensor_width] network input.
// Inside the copy rectangle it holds the processed image pixel
// (src_y + ty - dst_y, src_x + tx - dst_x); everywhere else exact zeros.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  if (gid.x >= params.tensor_width || gid.y >= params.tensor_height) {
    return;
  }
  let dst = (gid.y * params.tensor_width + gid.x) * OUT_BLOCKS;
  let ry = i32(gid.y) - i32(params.dst_y);
  let rx = i32(gid.x) - i32(params.dst_x);
  let inside = ry >= 0 && rx >= 0 && ry < i32(params.copy_height) && rx < i32(params.copy_width);
  var main_v = vec3<f32>(0.0);
  var albedo_v = vec3<f32>(0.0);
  var normal_v = vec3<f32>(0.0);
  if (inside) {
    let y = params.src_y + u32(ry);
    let x = params.src_x + u32(rx);
    main_v = sanitize3(read_main(y, x) * frame.input_scale, MAIN_LO, MAIN_HI);
    main_v = transfer_forward3(main_v);
    albedo_v = sanitize3(read_albedo(y, x), 0.0, 1.0);
    normal_v = sanitize3(read_normal(y, x), -1.0, 1.0) * 0.5 + 0.5;
  }
  output[dst + 0u] = to_output(vec4<f32>(f32(main_v.x), f32(main_v.y), f32(main_v.z), f32(albedo_v.x)));
  output[dst + 1u] = to_output(vec4<f32>(f32(albedo_v.y), f32(albedo_v.z), f32(normal_v.x), f32(normal_v.y)));
  output[dst + 2u] = to_output(vec4<f32>(f32(normal_v.z), 0.0, 0.0, 0.0));
}
