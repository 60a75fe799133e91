{{ params_struct }}

{% for b in bindings %}
@group(0) @binding({{ b.index }}) var<{{ b.space }}> {{ b.name }}: {{ b.type }};
{% endfor %}
