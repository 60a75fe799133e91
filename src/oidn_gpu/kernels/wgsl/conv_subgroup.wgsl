{% include "bindings.wgsl" %}

{% include "conv_common.wgsl" %}

// Every invocation runs the same uniform loops (no early return), so the weight
// broadcasts see full subgroups; out-of-tensor taps read a clamped pixel and
// select zero instead.
@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = min(gid.z, OUT_BLOCKS - 1u);
  let inside = gid.x < out_w && gid.y < out_h;
  var acc = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    let iy = i32(gid.y) + i32(ky) - 1;
    let cy = u32(clamp(iy, 0, i32(out_h) - 1));
    for (var kx = 0u; kx < 3u; kx++) {
      let ix = i32(gid.x) + i32(kx) - 1;
      let cx = u32(clamp(ix, 0, i32(out_w) - 1));
      let ok = inside && iy >= 0 && ix >= 0 && iy < i32(out_h) && ix < i32(out_w);
      let tap = ky * 3u + kx;
{% for s in sources %}
      {
        // source {{ s.index }}{% if s.upsample %}, nearest x2 upsampled{% endif %}

{% if s.upsample %}
        let base = ((cy / 2u) * (out_w / 2u) + cx / 2u) * {{ s.blocks }};
{% else %}
        let base = (cy * out_w + cx) * {{ s.blocks }};
{% endif %}
        for (var b = 0u; b < {{ s.blocks }}; b++) {
          let v = select({{ act_type }}(), {{ s.name }}[base + b], ok);
          acc = accumulate(acc, v, weight_index(ob, tap, {{ s.offset }} + b));
        }
      }
{% endfor %}
    }
  }
  if (inside && gid.z < OUT_BLOCKS) {
    output[(gid.y * out_w + gid.x) * OUT_BLOCKS + ob] = to_output(activate(acc));
  }
}
