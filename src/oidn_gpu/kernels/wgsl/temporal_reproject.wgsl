{% include "bindings.wgsl" %}

// Pass 1 of the temporal mode (oidn_gpu.temporal.passes.reproject, the same arithmetic in
// the same order): the previous state read at (x + mx, y + my), each bilinear tap kept when
// on screen with an agreeing guide (two tests: the accumulated input's channels, x, and the
// output's, y), Catmull-Rom when all four are kept; the signal accumulated where the motion
// is whole pixels. Inputs are finite (the host sanitizes).
// part "all" is the whole pass; the device session splits it in two: "gather" writes the
// reprojected history and its two validity flags into `out` (16 floats per pixel: the
// GATHERED channels, then valid and valid_out), "accumulate" reads them back (`hist`) and
// accumulates the signal. The guide "gather" reads may lack the albedo and normal that no
// tap test uses (and their NaN flag): "accumulate" then rejects the history of a pixel
// whose full guide has the flag, which is what the whole pass gives there. The session's
// "accumulate" also counts the pixels that kept their history (`count`: a sum per
// workgroup, then one atomic add into counter[0], which the host zeroes before the frame)
// and writes 1 where a pixel has none into `missing` (`missing`, for pass 1c).
// The previous state is read and `out` written as vec4s (STATE_CHANNELS = 16 floats per
// pixel), the state's channels combined four at a time: each component takes the same
// operations in the same order as one channel at a time.

fn guide_of(p: u32, c: u32) -> f32 {
  return guide[p * GUIDE_CHANNELS + c];
}

{% if part != "accumulate" %}
fn prev_guide_of(p: u32, c: u32) -> f32 {
  return prev_guide[p * GUIDE_CHANNELS + c];
}

fn state_of(p: u32, c: u32) -> f32 {
  return prev_state[p * STATE_VEC4S + c / 4u][c % 4u];
}

// Whether the normals of pixel p and the previous one at q are within the angle whose
// cosine is cos_min, and both or neither are zero.
fn normals_agree(p: u32, q: u32, cos_min: f32) -> bool {
  let n = vec3<f32>(guide_of(p, 1u), guide_of(p, 2u), guide_of(p, 3u));
  let m = vec3<f32>(prev_guide_of(q, 1u), prev_guide_of(q, 2u), prev_guide_of(q, 3u));
  let ln = sqrt(n.x * n.x + n.y * n.y + n.z * n.z);
  let lm = sqrt(m.x * m.x + m.y * m.y + m.z * m.z);
  let aligned = n.x * m.x + n.y * m.y + n.z * m.z >= cos_min * (ln * lm);
  return aligned && ((ln > MIN_NORMAL_LENGTH) == (lm > MIN_NORMAL_LENGTH));
}

// Whether the depths of pixel p and the previous one at q are within `tolerance` relative.
fn depth_agrees(p: u32, q: u32, tolerance: f32) -> bool {
  let d = guide_of(p, 0u);
  let e = prev_guide_of(q, 0u);
  return abs(d - e) <= tolerance * max(abs(d), abs(e)) || d == e;
}

// Whether the normal and albedo of pixel p and the previous ones at q agree (those given).
fn aux_agrees(p: u32, q: u32) -> bool {
  var ok = true;
{% if use_normal %}
  ok = ok && normals_agree(p, q, NORMAL_COS);
{% endif %}
{% if use_albedo %}
  let a = vec3<f32>(guide_of(p, 4u), guide_of(p, 5u), guide_of(p, 6u));
  let b = vec3<f32>(prev_guide_of(q, 4u), prev_guide_of(q, 5u), prev_guide_of(q, 6u));
  let diff = max(max(abs(a.x - b.x), abs(a.y - b.y)), abs(a.z - b.z));
  ok = ok && diff <= ALBEDO_TOLERANCE;
{% endif %}
  return ok;
}

// (geometry, output): whether the tap q may serve pixel p's accumulated input (depth where
// given, else normal and albedo) and its output history (that and normal and albedo; with
// depth, also the normals where the depth moved by more than SURFACE_DEPTH).
fn tap_tests(p: u32, q: u32) -> vec2<bool> {
  let known = guide_of(p, UNKNOWN) == 0.0 && prev_guide_of(q, UNKNOWN) == 0.0;
  let aux = aux_agrees(p, q);
{% if use_depth %}
  let geometry = known && depth_agrees(p, q, DEPTH_TOLERANCE);
  let surface = depth_agrees(p, q, SURFACE_DEPTH);
  let facing = normals_agree(p, q, SILHOUETTE_NORMAL_COS);
  return vec2<bool>(geometry, geometry && aux && (surface || facing));
{% else %}
  let geometry = known && aux;
  return vec2<bool>(geometry, geometry);
{% endif %}
}

{% endif %}
fn catmull_rom(t: f32) -> vec4<f32> {
  let t2 = t * t;
  return vec4<f32>(
    t * (-0.5 + t * (1.0 - 0.5 * t)),
    1.0 + t2 * (-2.5 + 1.5 * t),
    t * (0.5 + t * (2.0 - 1.5 * t)),
    t2 * (-0.5 + 0.5 * t));
}

fn luminance(r: f32, g: f32, b: f32) -> f32 {
  return LUMINANCE_R * r + LUMINANCE_G * g + LUMINANCE_B * b;
}

// The REPROJECTION_CHANNELS (16) floats of pixel p's out, as STATE_VEC4S vec4s.
fn write_out(p: u32, r: array<f32, REPROJECTION_CHANNELS>) {
  for (var v = 0u; v < STATE_VEC4S; v = v + 1u) {
    out[p * STATE_VEC4S + v] = vec4<f32>(r[4u * v], r[4u * v + 1u], r[4u * v + 2u],
                                         r[4u * v + 3u]);
  }
}

{% if count %}
var<workgroup> kept: atomic<u32>;

{% endif %}
// Pass 1 (or its part) at pixel id; whether the pixel kept its history.
fn reproject_pixel(id: vec3<u32>) -> bool {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return false;
  }
  let p = id.y * width + id.x;
  let mx = motion[p * 2u];
  let my = motion[p * 2u + 1u];
  let reach = f32(width + height);
  let usable = abs(mx) <= reach && abs(my) <= reach;
  let px = f32(id.x) + select(0.0, mx, usable);
  let py = f32(id.y) + select(0.0, my, usable);
  let x0 = floor(px);
  let y0 = floor(py);
  let fx = px - x0;
  let fy = py - y0;
  let ix = i32(x0);
  let iy = i32(y0);
  let iw = i32(width);
  let ih = i32(height);
{% if part == "accumulate" %}
  let hp = p * STATE_VEC4S;
  var history: array<f32, GATHERED>;
  for (var c = 0u; c < GATHERED; c = c + 1u) {
    history[c] = hist[hp + c / 4u][c % 4u];
  }
  let unknown_here = guide_of(p, UNKNOWN) != 0.0;
  let flags = hist[hp + GATHERED / 4u];
  let valid = flags[GATHERED % 4u] > 0.5 && !unknown_here;
  let valid_out = flags[GATHERED % 4u + 1u] > 0.5 && !unknown_here;
{% else %}
  var weights = array<f32, 4>((1.0 - fx) * (1.0 - fy), fx * (1.0 - fy), (1.0 - fx) * fy, fx * fy);
  var total = vec2<f32>(0.0, 0.0);
  var taken = vec2<u32>(0u, 0u);
  var gathered: array<vec4<f32>, STATE_VEC4S>;
  var low: array<vec4<f32>, STATE_VEC4S>;
  var high: array<vec4<f32>, STATE_VEC4S>;
  for (var v = 0u; v < STATE_VEC4S; v = v + 1u) {
    gathered[v] = vec4<f32>(0.0);
  }
  for (var k = 0u; k < 4u; k = k + 1u) {
    let xs = ix + i32(k & 1u);
    let ys = iy + i32(k >> 1u);
    let inside = xs >= 0 && xs < iw && ys >= 0 && ys < ih;
    let q = u32(clamp(ys, 0, ih - 1)) * width + u32(clamp(xs, 0, iw - 1));
    let base = usable && inside && state_of(q, STATE_COUNT) > 0.0;
    let tests = tap_tests(p, q);
    let ok = vec2<bool>(base && tests.x, base && tests.y);
    let w = vec2<f32>(select(0.0, weights[k], ok.x), select(0.0, weights[k], ok.y));
    total = total + w;
    taken = taken + vec2<u32>(select(0u, 1u, ok.x), select(0u, 1u, ok.y));
    for (var v = 0u; v < STATE_VEC4S; v = v + 1u) {
      let s = prev_state[q * STATE_VEC4S + v];
      let c = 4u * v;
      let weight = vec4<f32>(select(w.y, w.x, c < STATE_OUTPUT),
                             select(w.y, w.x, c + 1u < STATE_OUTPUT),
                             select(w.y, w.x, c + 2u < STATE_OUTPUT),
                             select(w.y, w.x, c + 3u < STATE_OUTPUT));
      gathered[v] = gathered[v] + weight * s;
      if (k == 0u) {
        low[v] = s;
        high[v] = s;
      } else {
        low[v] = min(low[v], s);
        high[v] = max(high[v], s);
      }
    }
  }
  let valid = total.x >= MIN_TAP_WEIGHT;
  let valid_out = total.y >= MIN_TAP_WEIGHT;
  let divisor = vec2<f32>(select(1.0, total.x, valid), select(1.0, total.y, valid_out));
  var history: array<f32, GATHERED>;
  for (var c = 0u; c < GATHERED; c = c + 1u) {
    history[c] = gathered[c / 4u][c % 4u] / select(divisor.y, divisor.x, c < STATE_OUTPUT);
  }
  if (taken.x == 4u || taken.y == 4u) {
    let wx = catmull_rom(fx);
    let wy = catmull_rom(fy);
    var cubic: array<vec4<f32>, STATE_VEC4S>;
    for (var v = 0u; v < STATE_VEC4S; v = v + 1u) {
      cubic[v] = vec4<f32>(0.0);
    }
    for (var j = 0; j < 4; j = j + 1) {
      let yc = u32(clamp(iy + j - 1, 0, ih - 1));
      for (var i = 0; i < 4; i = i + 1) {
        let q = yc * width + u32(clamp(ix + i - 1, 0, iw - 1));
        let w = wy[j] * wx[i];
        for (var v = 0u; v < STATE_VEC4S; v = v + 1u) {
          cubic[v] = cubic[v] + w * prev_state[q * STATE_VEC4S + v];
        }
      }
    }
    for (var c = 0u; c < GATHERED; c = c + 1u) {
      if (select(taken.y, taken.x, c < STATE_OUTPUT) == 4u) {
        let v = c / 4u;
        history[c] = min(max(cubic[v][c % 4u], low[v][c % 4u]), high[v][c % 4u]);
      }
    }
  }
{% endif %}
  var r: array<f32, REPROJECTION_CHANNELS>;  // this pixel's out, written as vec4s
{% if part == "gather" %}
  for (var c = 0u; c < GATHERED; c = c + 1u) {
    r[c] = history[c];
  }
  r[GATHERED] = select(0.0, 1.0, valid);
  r[GATHERED + 1u] = select(0.0, 1.0, valid_out);
  write_out(p, r);
  return valid;
{% else %}
  let whole = min(fx, 1.0 - fx) <= SUBPIXEL_TOLERANCE && min(fy, 1.0 - fy) <= SUBPIXEL_TOLERANCE;
  let accumulates = valid && whole;
  let count = select(1.0, min(history[STATE_COUNT] + 1.0, HISTORY), accumulates);
  let alpha = 1.0 / count;
  var scale = 1.0;
{% if fireflies %}
  let s = p * SIGNAL_CHANNELS;
  let l_in = luminance(signal[s], signal[s + 1u], signal[s + 2u]);
  // the accumulated input's luminance where it holds 2 frames or more, else the
  // reprojected previous output's
  let inputs = accumulates && history[STATE_COUNT] >= 2.0;
  var guide = luminance(history[STATE_OUTPUT], history[STATE_OUTPUT + 1u],
                        history[STATE_OUTPUT + 2u]);
  if (inputs) {
    guide = luminance(history[0], history[1], history[2]);
  }
  let limit = FIREFLY_RATIO * guide;
  if ((inputs || valid_out) && limit > 0.0 && l_in > limit) {
    scale = limit / l_in;
  }
{% endif %}
  for (var c = 0u; c < SIGNAL_CHANNELS; c = c + 1u) {
    var v = signal[p * SIGNAL_CHANNELS + c];
    if (c < 3u) {
      v = v * scale;
    }
    let acc = history[c];
    r[c] = select(v, acc + (v - acc) * alpha, accumulates && count > 1.0);
  }
  r[STATE_COUNT] = count;
  for (var c = 0u; c < 3u; c = c + 1u) {
    r[STATE_OUTPUT + c] = select(0.0, history[STATE_OUTPUT + c], valid_out);
  }
  r[REPROJECTION_VALID] = select(0.0, 1.0, valid);
  r[REPROJECTION_OUTPUT_COUNT] = select(
    1.0, min(history[STATE_OUTPUT_COUNT] + 1.0, OUTPUT_HISTORY), valid_out);
  r[REPROJECTION_INPUT_SCALE] = scale;
  write_out(p, r);
{% if luma %}
  // The light-change test's luminances of this pixel, for its windows (temporal_changes).
  let ls = p * SIGNAL_CHANNELS;
  luma[p * 2u] = clamp((LUMINANCE_R * signal[ls] + LUMINANCE_G * signal[ls + 1u]
    + LUMINANCE_B * signal[ls + 2u]) * scale, -MAX_LUMINANCE, MAX_LUMINANCE);
  let lo = STATE_OUTPUT;
  luma[p * 2u + 1u] = clamp(LUMINANCE_R * r[lo] + LUMINANCE_G * r[lo + 1u]
    + LUMINANCE_B * r[lo + 2u], -MAX_LUMINANCE, MAX_LUMINANCE);
{% endif %}
{% if missing %}
  missing[p] = select(1.0, 0.0, valid);
{% endif %}
  return valid;
{% endif %}
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(
  @builtin(global_invocation_id) id: vec3<u32>,
  @builtin(local_invocation_index) local: u32,
) {
{% if count %}
  if (local == 0u) {
    atomicStore(&kept, 0u);
  }
  workgroupBarrier();
  if (reproject_pixel(id)) {
    atomicAdd(&kept, 1u);
  }
  workgroupBarrier();
  if (local == 0u) {
    let n = atomicLoad(&kept);
    if (n > 0u) {
      atomicAdd(&counter[0], n);
    }
  }
{% else %}
  _ = reproject_pixel(id);
{% endif %}
}
