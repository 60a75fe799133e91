{% if not analytic and not parity %}
    // advance this invocation's K lane by one K tile (at most one carry)
    channel_block += K_ADVANCE_BLOCKS;
    let carry = channel_block >= IN_BLOCKS;
    channel_block -= select(0u, IN_BLOCKS, carry);
    filter_position += K_ADVANCE_TAPS + select(0u, 1u, carry);
{% endif %}
