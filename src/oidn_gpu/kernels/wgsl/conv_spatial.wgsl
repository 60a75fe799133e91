{% include "bindings.wgsl" %}

{% include "conv_common.wgsl" %}

// The (WG + 2) x (WG + 2) input halo patch of this workgroup, all IN_BLOCKS blocks.
var<workgroup> halo: array<{{ act_type }}, PATCH_SIZE>;
{% if cache_weights %}
// The 9 x IN_BLOCKS x 4 weight vec4s of this workgroup's output block.
var<workgroup> weight_cache: array<{{ act_type }}, WEIGHT_CACHE_SIZE>;
{% endif %}

// Patch element li: pixel (li / IN_BLOCKS) of the patch, block li % IN_BLOCKS; zero outside.
fn load_patch(li: u32, x0: u32, y0: u32, conv_h: u32, conv_w: u32) -> {{ act_type }} {
  let pp = li / IN_BLOCKS;
  let ib = li % IN_BLOCKS;
  let ix = i32(x0 + pp % PATCH) - 1;
  let iy = i32(y0 + pp / PATCH) - 1;
  var v = {{ act_type }}();
  if (ix >= 0 && iy >= 0 && ix < i32(conv_w) && iy < i32(conv_h)) {
{% for s in sources %}
    {{ s.branch }} (ib < {{ s.end }}) {
{% if s.upsample %}
      v = {{ s.name }}[((u32(iy) / 2u) * (conv_w / 2u) + u32(ix) / 2u) * {{ s.blocks }} + ib - {{ s.offset }}];
{% else %}
      v = {{ s.name }}[(u32(iy) * conv_w + u32(ix)) * {{ s.blocks }} + ib - {{ s.offset }}];
{% endif %}
{% endfor %}
    }
  }
  return v;
}

@compute @workgroup_size(WG, WG, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = wid.z;
  let x0 = wid.x * WG;
  let y0 = wid.y * WG;
  let local_linear = lid.y * WG + lid.x;
  for (var li = local_linear; li < PATCH_SIZE; li += THREADS) {
    halo[li] = load_patch(li, x0, y0, out_h, out_w);
  }
{% if cache_weights %}
  let weight_base = ob * WEIGHT_CACHE_SIZE;
  for (var li = local_linear; li < WEIGHT_CACHE_SIZE; li += THREADS) {
    weight_cache[li] = weights[weight_base + li];
  }
{% endif %}
  workgroupBarrier();

  let ox = x0 + lid.x;
  let oy = y0 + lid.y;
  if (ox >= out_w || oy >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
  var acc = bias[ob];
  for (var ky = 0u; ky < 3u; ky++) {
    for (var kx = 0u; kx < 3u; kx++) {
      let tap = ky * 3u + kx;
      let pb = ((lid.y + ky) * PATCH + lid.x + kx) * IN_BLOCKS;
      for (var ib = 0u; ib < IN_BLOCKS; ib++) {
{% if cache_weights %}
        acc = accumulate(acc, halo[pb + ib], (tap * IN_BLOCKS + ib) * 4u);
{% else %}
        acc = accumulate(acc, halo[pb + ib], weight_index(ob, tap, ib));
{% endif %}
      }
    }
  }
  output[(oy * out_w + ox) * OUT_BLOCKS + ob] = to_output(activate(acc));
}
