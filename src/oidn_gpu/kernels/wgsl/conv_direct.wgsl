{% include "bindings.wgsl" %}

{% include "conv_common.wgsl" %}

// Pre-activation conv value (bias included) of output block `ob` at conv-resolution
// pixel (cy, cx) of a [*, conv_h, conv_w] conv. Taps outside the tensor are skipped.
fn conv_at(cy: u32, cx: u32, ob: u32, conv_h: u32, conv_w: u32) -> vec4<f32> {
  var acc = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    let iy = i32(cy) + i32(ky) - 1;
    if (iy < 0 || iy >= i32(conv_h)) {
      continue;
    }
    for (var kx = 0u; kx < 3u; kx++) {
      let ix = i32(cx) + i32(kx) - 1;
      if (ix < 0 || ix >= i32(conv_w)) {
        continue;
      }
      let tap = ky * 3u + kx;
{% for s in sources %}
      {
        // source {{ s.index }}{% if s.upsample %}, nearest x2 upsampled{% endif %}

{% if s.upsample %}
        let base = ((u32(iy) / 2u) * (conv_w / 2u) + u32(ix) / 2u) * {{ s.blocks }};
{% else %}
        let base = (u32(iy) * conv_w + u32(ix)) * {{ s.blocks }};
{% endif %}
        for (var b = 0u; b < {{ s.blocks }}; b++) {
          acc = accumulate(acc, {{ s.name }}[base + b], weight_index(ob, tap, {{ s.offset }} + b));
        }
      }
{% endfor %}
    }
  }
  return acc;
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = gid.z;
  if (gid.x >= out_w || gid.y >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
{% if pool %}
  let conv_h = out_h * 2u;
  let conv_w = out_w * 2u;
  var result = activate(conv_at(gid.y * 2u, gid.x * 2u, ob, conv_h, conv_w));
  result = max(result, activate(conv_at(gid.y * 2u, gid.x * 2u + 1u, ob, conv_h, conv_w)));
  result = max(result, activate(conv_at(gid.y * 2u + 1u, gid.x * 2u, ob, conv_h, conv_w)));
  result = max(result, activate(conv_at(gid.y * 2u + 1u, gid.x * 2u + 1u, ob, conv_h, conv_w)));
{% else %}
  let result = activate(conv_at(gid.y, gid.x, ob, out_h, out_w));
{% endif %}
  output[(gid.y * out_w + gid.x) * OUT_BLOCKS + ob] = to_output(result);
}
