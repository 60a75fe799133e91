{% if analytic %}
      let k = {{ step.kb }} + k_lane;
      let k_ok = k < TOTAL_K;
      let tap = k / IN_BLOCKS;
      let ib = k % IN_BLOCKS;
{% else %}
      let tap = filter_position;
      let ib = channel_block;
      let k_ok = tap < 9u;
{% endif %}
