{% for l in loads %}
{{ step.pad }}var in{{ l.j }} = {{ act_type }}();
{% endfor %}
{% for l in weight_loads %}
{{ step.pad }}var wt{{ l.j }} = {{ act_type }}();
{% endfor %}
