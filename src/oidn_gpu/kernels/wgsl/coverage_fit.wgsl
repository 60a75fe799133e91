// The first pass of an alpha's coverage fit: the guided filter of K. He, J. Sun and X. Tang,
// "Guided Image Filtering" (ECCV 2010), section 3, with the alpha as the filtered image and
// the albedo as the guide (`oidn_gpu.image.coverage`).
{% include "bindings.wgsl" %}

{% include "image_read.wgsl" %}

// The alpha's element e, clipped to 0..1 with `params.clip`.
fn clipped_alpha(e: u32) -> f32 {
  let a = load_alpha(e);
  if (params.clip != 0u) {
    return clamp(a, 0.0, 1.0);
  }
  return a;
}

// Tap d (0 .. 2 RADIUS) of the window centred on the extended image's coordinate c: the
// image's coordinate c + d - 2 RADIUS, clamped to its `size` pixels (the nearest edge pixel).
fn clamped(c: u32, d: u32, size: u32) -> u32 {
  return min(max(c + d, 2u * RADIUS) - 2u * RADIUS, size - 1u);
}

// The window centred on the extended image's pixel (id.y, id.x), i.e. on the image's pixel
// (id.y - RADIUS, id.x - RADIUS): the means of the centred alpha p, guide g, their products
// g p and the guide's products g g (summed by columns, then the columns from left to right,
// as `image.coverage` sums them); its fit alpha ~ a . g + b solves (cov(g) + EPS) a =
// cov(g, p) by the adjugate, b = mean(p) - a . mean(g). Stored as (a0, a1, a2, b).
@compute @workgroup_size(WG, WG, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let ext_h = params.height + 2u * RADIUS;
  let ext_w = params.width + 2u * RADIUS;
  if (id.y >= ext_h || id.x >= ext_w) {
    return;
  }
  var g = vec3<f32>(0.0);
  var p = 0.0f;
  var gp = vec3<f32>(0.0);
  var gg_diagonal = vec3<f32>(0.0);  // g0 g0, g1 g1, g2 g2
  var gg_across = vec3<f32>(0.0);  // g0 g1, g0 g2, g1 g2
  for (var dx = 0u; dx < SIDE; dx = dx + 1u) {
    let x = clamped(id.x, dx, params.width);
    let alpha_column = params.alpha_offset + x * params.alpha_pixel_stride;
    var column_g = vec3<f32>(0.0);
    var column_p = 0.0f;
    var column_gp = vec3<f32>(0.0);
    var column_diagonal = vec3<f32>(0.0);
    var column_across = vec3<f32>(0.0);
    for (var dy = 0u; dy < SIDE; dy = dy + 1u) {
      let y = clamped(id.y, dy, params.height);
      let v = read_guide(y, x) - vec3<f32>(CENTRE);
      let a = clipped_alpha(alpha_column + y * params.alpha_row_stride) - CENTRE;
      column_g = column_g + v;
      column_p = column_p + a;
      column_gp = column_gp + v * a;
      column_diagonal = column_diagonal + v * v;
      column_across = column_across + v.xxy * v.yzz;
    }
    g = g + column_g;
    p = p + column_p;
    gp = gp + column_gp;
    gg_diagonal = gg_diagonal + column_diagonal;
    gg_across = gg_across + column_across;
  }
  g = g * INV_COUNT;
  p = p * INV_COUNT;
  let s_diagonal = gg_diagonal * INV_COUNT - g * g + vec3<f32>(EPS);
  let s_across = gg_across * INV_COUNT - g.xxy * g.yzz;
  let c = gp * INV_COUNT - g * p;
  let a00 = s_diagonal.x;
  let a11 = s_diagonal.y;
  let a22 = s_diagonal.z;
  let a01 = s_across.x;
  let a02 = s_across.y;
  let a12 = s_across.z;
  // The adjugate of the symmetric matrix, row by row.
  let i00 = a11 * a22 - a12 * a12;
  let i01 = a02 * a12 - a01 * a22;
  let i02 = a01 * a12 - a02 * a11;
  let i11 = a00 * a22 - a02 * a02;
  let i12 = a01 * a02 - a00 * a12;
  let i22 = a00 * a11 - a01 * a01;
  let det = a00 * i00 + a01 * i01 + a02 * i02;
  let a = vec3<f32>(
    i00 * c.x + i01 * c.y + i02 * c.z,
    i01 * c.x + i11 * c.y + i12 * c.z,
    i02 * c.x + i12 * c.y + i22 * c.z,
  ) / det;
  let b = p - a.x * g.x - a.y * g.y - a.z * g.z;
  ab[id.y * ext_w + id.x] = vec4<f32>(a, b);
}
