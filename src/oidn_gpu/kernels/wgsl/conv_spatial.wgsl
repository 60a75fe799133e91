{% include "bindings.wgsl" %}

{% include "conv_common.wgsl" %}

{% if wide %}
// The PATCH_W x PATCH input halo patch of this workgroup's TILE_W x WG pixels: pixel
// (row, col)'s IN_BLOCKS blocks from element row * ROW_STRIDE + col * PIXEL_STRIDE.
{% if padded %}
// Unused elements between pixels and rows spread neighbouring ones over the banks.
{% endif %}
{% else %}
// The (WG + 2) x (WG + 2) input halo patch of this workgroup, all IN_BLOCKS blocks.
{% endif %}
var<workgroup> halo: array<{{ act_type }}, PATCH_SIZE>;
{% if cache_weights %}
// The 9 x IN_BLOCKS x 4 weight vec4s of this workgroup's output block.
var<workgroup> weight_cache: array<{{ act_type }}, WEIGHT_CACHE_SIZE>;
{% endif %}

// Patch element li: pixel (li / IN_BLOCKS) of the patch, block li % IN_BLOCKS; zero outside.
fn load_patch(li: u32, x0: u32, y0: u32, conv_h: u32, conv_w: u32) -> {{ act_type }} {
  let pp = li / IN_BLOCKS;
  let ib = li % IN_BLOCKS;
{% if wide %}
  let ix = i32(x0 + pp % PATCH_W) - 1;
  let iy = i32(y0 + pp / PATCH_W) - 1;
{% else %}
  let ix = i32(x0 + pp % PATCH) - 1;
  let iy = i32(y0 + pp / PATCH) - 1;
{% endif %}
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
{% if wide %}

// acc += W * v for the 4 weight vec4s w0..w3 of one (tap, input block), loaded once for
// every pixel of the invocation: `accumulate`'s operations in its order, so the same bits.
fn accumulate_loaded(
  acc: vec4<f32>,
  v: {{ act_type }},
  w0: {{ act_type }},
  w1: {{ act_type }},
  w2: {{ act_type }},
  w3: {{ act_type }},
) -> vec4<f32> {
{% if f16 and f32_sum %}
  let x = vec4<f32>(v);
  var a = fma(vec4<f32>(w0), vec4<f32>(x.x), acc);
  a = fma(vec4<f32>(w1), vec4<f32>(x.y), a);
  a = fma(vec4<f32>(w2), vec4<f32>(x.z), a);
  a = fma(vec4<f32>(w3), vec4<f32>(x.w), a);
  return a;
{% elif f16 %}
  var p = w0 * v.x;
  p = fma(w1, vec4<f16>(v.y), p);
  p = fma(w2, vec4<f16>(v.z), p);
  p = fma(w3, vec4<f16>(v.w), p);
  return acc + vec4<f32>(p);
{% else %}
  var a = fma(w0, vec4<f32>(v.x), acc);
  a = fma(w1, vec4<f32>(v.y), a);
  a = fma(w2, vec4<f32>(v.z), a);
  a = fma(w3, vec4<f32>(v.w), a);
  return a;
{% endif %}
}
{% endif %}

@compute @workgroup_size(WG, WG, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let ob = wid.z;
{% if wide %}
  let x0 = wid.x * TILE_W;
  let y0 = wid.y * WG;
  let local_linear = lid.y * WG + lid.x;
  for (var li = local_linear; li < PATCH_ELEMENTS; li += THREADS) {
{% if padded %}
    let pp = li / IN_BLOCKS;
    let slot = (pp / PATCH_W) * ROW_STRIDE + (pp % PATCH_W) * PIXEL_STRIDE + li % IN_BLOCKS;
    halo[slot] = load_patch(li, x0, y0, out_h, out_w);
{% else %}
    halo[li] = load_patch(li, x0, y0, out_h, out_w);
{% endif %}
  }
{% else %}
  let x0 = wid.x * WG;
  let y0 = wid.y * WG;
  let local_linear = lid.y * WG + lid.x;
  for (var li = local_linear; li < PATCH_SIZE; li += THREADS) {
    halo[li] = load_patch(li, x0, y0, out_h, out_w);
  }
{% endif %}
{% if cache_weights %}
  let weight_base = ob * WEIGHT_CACHE_SIZE;
  for (var li = local_linear; li < WEIGHT_CACHE_SIZE; li += THREADS) {
    weight_cache[li] = weights[weight_base + li];
  }
{% endif %}
  workgroupBarrier();

{% if wide %}
  // This invocation's pixels: (ox + WG * p, oy) for p < PIXELS.
{% endif %}
  let ox = x0 + lid.x;
  let oy = y0 + lid.y;
  if (ox >= out_w || oy >= out_h || ob >= OUT_BLOCKS) {
    return;
  }
{% if wide %}
{% for px in pixels %}
  var {{ px.acc }} = bias[ob];
{% endfor %}
  for (var ky = 0u; ky < 3u; ky++) {
    for (var kx = 0u; kx < 3u; kx++) {
      let tap = ky * 3u + kx;
      let pb = (lid.y + ky) * ROW_STRIDE + (lid.x + kx) * PIXEL_STRIDE;
      for (var ib = 0u; ib < IN_BLOCKS; ib++) {
{% if cache_weights %}
        let w = (tap * IN_BLOCKS + ib) * 4u;
{% else %}
        let w = weight_index(ob, tap, ib);
{% endif %}
        let w0 = weight_at(w);
        let w1 = weight_at(w + 1u);
        let w2 = weight_at(w + 2u);
        let w3 = weight_at(w + 3u);
{% for px in pixels %}
        {{ px.acc }} = accumulate_loaded({{ px.acc }}, halo[{{ px.patch_index }}], w0, w1, w2, w3);
{% endfor %}
      }
    }
  }
{% for px in pixels %}
{% if px.first %}
  output[(oy * out_w + ox) * OUT_BLOCKS + ob] = to_output(activate({{ px.acc }}));
{% else %}
  if (ox + {{ px.dx }}u < out_w) {
    output[(oy * out_w + ox + {{ px.dx }}u) * OUT_BLOCKS + ob] = to_output(activate({{ px.acc }}));
  }
{% endif %}
{% endfor %}
{% else %}
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
{% endif %}
}
