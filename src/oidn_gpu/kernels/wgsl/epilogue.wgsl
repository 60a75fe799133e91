// Bias is already in the accumulator; apply the activation.
fn activate(v: vec4<f32>) -> vec4<f32> {
{% if relu %}
  return max(v, vec4<f32>(0.0));
{% else %}
  return v;
{% endif %}
}

{% include "to_output.wgsl" %}
