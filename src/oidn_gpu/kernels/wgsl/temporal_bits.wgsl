// Float32 values read as their bits (u32), so that NaN and infinities are told apart by
// bits: WGSL may assume that no float is NaN or infinite.
const EXPONENT_BITS: u32 = 0x7f800000u;
const MANTISSA_BITS: u32 = 0x007fffffu;
const SIGN_BIT: u32 = 0x80000000u;

fn bits_finite(bits: u32) -> bool {
  return (bits & EXPONENT_BITS) != EXPONENT_BITS;
}

fn bits_nan(bits: u32) -> bool {
  return !bits_finite(bits) && (bits & MANTISSA_BITS) != 0u;
}

// NumPy's nan_to_num(nan=nan_value, posinf=inf_value, neginf=-inf_value) of one value;
// finite values are passed through as they are.
fn bits_to_finite(bits: u32, nan_value: f32, inf_value: f32) -> f32 {
  if (bits_finite(bits)) {
    return bitcast<f32>(bits);
  }
  if ((bits & MANTISSA_BITS) != 0u) {
    return nan_value;
  }
  return select(inf_value, -inf_value, (bits & SIGN_BIT) != 0u);
}

// nan_to_num (NaN -> 0, +-inf -> +-MAX_SIGNAL), then clipped to +-MAX_SIGNAL.
fn bits_to_signal(bits: u32) -> f32 {
  let v = bits_to_finite(bits, 0.0, MAX_SIGNAL);
  if (v > MAX_SIGNAL) {
    return MAX_SIGNAL;
  }
  if (v < -MAX_SIGNAL) {
    return -MAX_SIGNAL;
  }
  return v;
}
