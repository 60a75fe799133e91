// Convert to the output storage type ({{ out_type }}).
fn to_output(v: vec4<f32>) -> {{ out_type }} {
{% if out_f16 %}
  // saturate to the largest half so overflow never produces Inf
  return vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
{% else %}
  return v;
{% endif %}
}
