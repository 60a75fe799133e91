// Index of the first of the 4 weight vec4s (input lanes 0..3) of output block
// `ob`, tap `tap` (ky * 3 + kx) and input block `ib` (concatenated over sources).
fn weight_index(ob: u32, tap: u32, ib: u32) -> u32 {
{% if k_major %}
  return ((tap * IN_BLOCKS + ib) * OUT_BLOCKS + ob) * 4u;
{% else %}
  return ((ob * 9u + tap) * IN_BLOCKS + ib) * 4u;
{% endif %}
}

// Weight vec4 i{% if subgroup_weights %}, broadcast from subgroup lane 0 (every lane reads the same index){% endif %}.
fn weight_at(i: u32) -> {{ act_type }} {
{% if subgroup_weights %}
  return subgroupBroadcast({{ weight_array }}[i], 0u);
{% else %}
  return {{ weight_array }}[i];
{% endif %}
}

// acc += W[w..w+3] * v: one input vec4 against 4 weight vec4s (output lanes).
{% if f16 and f32_sum %}
// f16 operands widened (exactly) and summed in f32.
{% elif f16 %}
// f16 products summed in a 4-term f16 partial, folded into the f32 accumulator.
{% endif %}
fn accumulate(acc: vec4<f32>, v: {{ act_type }}, w: u32) -> vec4<f32> {
{% if f16 and f32_sum %}
  let x = vec4<f32>(v);
  var a = fma(vec4<f32>(weight_at(w)), vec4<f32>(x.x), acc);
  a = fma(vec4<f32>(weight_at(w + 1u)), vec4<f32>(x.y), a);
  a = fma(vec4<f32>(weight_at(w + 2u)), vec4<f32>(x.z), a);
  a = fma(vec4<f32>(weight_at(w + 3u)), vec4<f32>(x.w), a);
  return a;
{% elif f16 %}
  var p = weight_at(w) * v.x;
  p = fma(weight_at(w + 1u), vec4<f16>(v.y), p);
  p = fma(weight_at(w + 2u), vec4<f16>(v.z), p);
  p = fma(weight_at(w + 3u), vec4<f16>(v.w), p);
  return acc + vec4<f32>(p);
{% else %}
  var a = fma(weight_at(w), vec4<f32>(v.x), acc);
  a = fma(weight_at(w + 1u), vec4<f32>(v.y), a);
  a = fma(weight_at(w + 2u), vec4<f32>(v.z), a);
  a = fma(weight_at(w + 3u), vec4<f32>(v.w), a);
  return a;
{% endif %}
}

{% include "epilogue.wgsl" %}
