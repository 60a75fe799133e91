// The log-average follows the host's deterministic halving tree over the bin grid: a range
// [r0, r1) x [c0, c1) with fewer rows than columns splits its columns at c0 + ncols / 2, else
// its rows at r0 + nrows / 2; leaves are single bins; partial sums add as left + right in f32.
// Here a single bin splits into (itself, empty) and an empty range into (empty, empty), so the
// tree is complete to any depth; adding an empty range's +0 changes no sum (no sum is -0).
fn child(r: vec4<u32>, right: bool) -> vec4<u32> {
  let rows = r.y - r.x;
  let cols = r.w - r.z;
  if (rows * cols <= 1u) {
    return select(r, vec4<u32>(r.x, r.x, r.z, r.z), right);
  }
  if (rows < cols) {
    let mid = r.z + cols / 2u;
    return select(vec4<u32>(r.x, r.y, r.z, mid), vec4<u32>(r.x, r.y, mid, r.w), right);
  }
  let mid = r.x + rows / 2u;
  return select(vec4<u32>(r.x, mid, r.z, r.w), vec4<u32>(mid, r.y, r.z, r.w), right);
}

// log2 of a bin's average luminance when it exceeds EPS, else 0 (and the count 0 or 1).
fn leaf(r: vec4<u32>) -> vec2<f32> {
  if (r.y - r.x == 0u || r.w - r.z == 0u) {
    return vec2<f32>(0.0, 0.0);
  }
  let average = bins[r.x * params.bins_w + r.z];
  if (average > EPS) {
    return vec2<f32>(log2(average), 1.0);
  }
  return vec2<f32>(0.0, 0.0);
}

// OIDN's scale KEY / 2^(sum / count) into frame[0] (1 when no bin counts; 0 when the mean is
// not finite) and the output scale 1 / s into frame[1] (0 when s is 0).
fn write_scale(sum: f32, count: u32) {
  var scale = 1.0;
  if (count > 0u) {
    let mean = sum / f32(count);
    if (mean < MAX_EXPONENT) {
      // 2^mean = 2^i * 2^f with i = floor(mean): exp2 only sees [0, 1), the power of two is
      // exact, so the quotient rounds as KEY / exp2f(mean) does.
      let i = floor(mean);
      scale = ldexp(KEY / exp2(mean - i), -i32(i));
    } else {
      scale = 0.0;
    }
  }
  frame[0] = scale;
  frame[1] = select(0.0, 1.0 / scale, scale != 0.0);
}
