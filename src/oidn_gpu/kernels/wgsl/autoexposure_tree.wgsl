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
