{% include "bindings.wgsl" %}

{% include "temporal_bits.wgsl" %}

// The frame's images packed on the device, as oidn_gpu.temporal.passes.pack_signal and
// pack_guide pack them on the host, and its motion made finite as the wgpu passes' host
// code does (NaN and +-inf -> +-FAR_MOTION, rejected by the reprojection). The images
// (dense float32, 3 channels; motion 2; depth 1) are read as bits. Without `signal`, only
// the guide of the images bound (zeros for the others, and their NaN flag) and the motion
// are written: what the reprojection's gather needs before the other images are uploaded.

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
  let width = params.width;
  let height = params.height;
  if (id.x >= width || id.y >= height) {
    return;
  }
  let p = id.y * width + id.x;
  let s = p * SIGNAL_CHANNELS;
  var g: array<f32, GUIDE_CHANNELS>;  // the pixel's guide, written as two vec4s
  var unknown = false;
  for (var c = 0u; c < 3u; c = c + 1u) {
{% if signal %}
    signal[s + c] = bits_to_signal(color[p * 3u + c]);
{% endif %}
{% if albedo %}
    let a = albedo[p * 3u + c];
    g[4u + c] = bits_to_signal(a);
    unknown = unknown || bits_nan(a);
{% else %}
    g[4u + c] = 0.0;
{% endif %}
{% if normal %}
    let n = normal[p * 3u + c];
    g[1u + c] = bits_to_signal(n);
    unknown = unknown || bits_nan(n);
{% else %}
    g[1u + c] = 0.0;
{% endif %}
{% if signal %}
    signal[s + 3u + c] = {{ "bits_to_signal(a)" if albedo else "0.0" }};
    signal[s + 6u + c] = {{ "bits_to_signal(n)" if normal else "0.0" }};
{% endif %}
  }
{% if depth %}
  let d = depth[p];
  g[0] = bits_to_signal(d);
  unknown = unknown || bits_nan(d);
{% else %}
  g[0] = 0.0;
{% endif %}
  g[UNKNOWN] = select(0.0, 1.0, unknown);
  guide[p * 2u] = vec4<f32>(g[0], g[1], g[2], g[3]);
  guide[p * 2u + 1u] = vec4<f32>(g[4], g[5], g[6], g[7]);
{% if motion %}
  for (var c = 0u; c < 2u; c = c + 1u) {
    motion_out[p * 2u + c] = bits_to_finite(motion[p * 2u + c], FAR_MOTION, FAR_MOTION);
  }
{% endif %}
}
