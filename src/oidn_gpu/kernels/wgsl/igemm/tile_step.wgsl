{#- One step of the K loop's tile pipeline (`conv_igemm.k_schedule`): its first line is
    indented by step.pad, the step's own lines keep their indentation, one newline ends it. -#}
{{ step.pad }}{% filter trim %}
{% if step.op == "declare" %}
{% include "igemm/tile_registers.wgsl" %}
{% elif step.op == "fetch" %}
{% include "igemm/tile_fetch.wgsl" %}
{% elif step.op == "store" %}
{% include "igemm/tile_store.wgsl" %}
{% elif step.op == "advance" %}
{% include "igemm/tile_advance.wgsl" %}
{% elif step.op == "barrier" %}
workgroupBarrier();
{% endif %}
{% endfilter %}

