{% for l in loads %}
{% if paired %}
    input_tile[{{ step.input_base }}input_slot(local_linear + {{ l.offset }}u)][half_lane] = in{{ l.j }};
{% else %}
    input_tile[{{ step.input_base }}input_slot(local_linear + {{ l.offset }}u)] = in{{ l.j }};
{% endif %}
{% endfor %}
{% for l in weight_loads %}
{% if paired %}
    weight_tile[{{ step.weight_base }}weight_slot(local_linear + {{ l.offset }}u)][half_lane] = wt{{ l.j }};
{% else %}
    weight_tile[{{ step.weight_base }}weight_slot(local_linear + {{ l.offset }}u)] = wt{{ l.j }};
{% endif %}
{% endfor %}
