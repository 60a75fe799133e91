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

{% if transfer == "pu" %}
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
{% elif transfer == "srgb" %}
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
{% elif transfer == "log" %}
// Log transfer (OIDN core/color.h): ln(y + 1) * NORM_SCALE and its inverse.
fn transfer_forward(y: f32) -> f32 {
  return log(y + 1.0) * NORM_SCALE;
}

fn transfer_inverse(x: f32) -> f32 {
  return exp(x * RCP_NORM_SCALE) - 1.0;
}
{% else %}
// Linear transfer: identity.
fn transfer_forward(y: f32) -> f32 {
  return y;
}

fn transfer_inverse(x: f32) -> f32 {
  return x;
}
{% endif %}

fn transfer_forward3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_forward(v.x), transfer_forward(v.y), transfer_forward(v.z));
}

fn transfer_inverse3(v: vec3<f32>) -> vec3<f32> {
  return vec3<f32>(transfer_inverse(v.x), transfer_inverse(v.y), transfer_inverse(v.z));
}
