{% include "bindings.wgsl" %}

{% include "epilogue.wgsl" %}

// Shared tiles: TILE_M GEMM rows x K_TILE input blocks, and K_TILE x TILE_N x 4 weight vec4s.
{% if paired %}
// Paired: each 16-byte element holds two vec4<f16> blocks (the columns of a mat2x4<f16>).
{% endif %}
var<workgroup> input_tile: array<{{ shared_type }}, INPUT_ARRAY_SIZE>;
var<workgroup> weight_tile: array<{{ shared_type }}, WEIGHT_ARRAY_SIZE>;
{% if pool_pairs %}
// A pooled quad spans two invocations (2 rows each): the odd row of threads hands its
// activated half-quad maxima to the even row here.
var<workgroup> pool_half: array<vec4<f32>, POOL_HALF_SIZE>;
{% endif %}

{% include "igemm/sources.wgsl" %}
fn fetch_weight(index: u32) -> {{ act_type }} {
  return {{ weight_load }};
}

{% if parity %}
{% include "igemm/parity_functions.wgsl" %}
{% else %}
// Conv-resolution pixel of GEMM row m, as vec2(x, y).
fn row_pixel(m: u32, out_w: u32, conv_w: u32) -> vec2<u32> {
{% if pool %}
  // 4 rows per pooled pixel, in 2x2 quad order
  let p = m / 4u;
  let q = m % 4u;
  return vec2<u32>((p % out_w) * 2u + (q & 1u), (p / out_w) * 2u + q / 2u);
{% else %}
  return vec2<u32>(m % conv_w, m / conv_w);
{% endif %}
}
{% endif %}

// Bit ky * 3 + kx is set when tap (ky, kx) of pixel (y, x) lies inside [conv_h, conv_w].
fn tap_mask(y: u32, x: u32, conv_h: u32, conv_w: u32) -> u32 {
  let cols = select(0u, 0x049u, x > 0u) | 0x092u | select(0u, 0x124u, x + 1u < conv_w);
  let rows = select(0u, 0x007u, y > 0u) | 0x038u | select(0u, 0x1c0u, y + 1u < conv_h);
  return cols & rows;
}

// Shared index of input load index li (one hole per thread row group when padded).
fn input_slot(li: u32) -> u32 {
  return {{ input_slot }};
}

// Shared index of weight load index li (one hole per 4 vec4s when padded).
fn weight_slot(li: u32) -> u32 {
  return {{ weight_slot }};
}

@compute @workgroup_size(WG_X, WG_Y, 1)
fn main(
  @builtin(local_invocation_id) lid: vec3<u32>,
  @builtin(workgroup_id) wid: vec3<u32>,
  @builtin(num_workgroups) nwg: vec3<u32>,
) {
  let out_h = params.height;
  let out_w = params.width;
  let conv_h = {{ conv_h }};
  let conv_w = {{ conv_w }};
{% if parity %}
{% include "igemm/parity_groups.wgsl" %}
{% else %}
  let row_count = conv_h * conv_w;
{% if channels_first %}
  // Workgroups are linear in (x, z); the column tiles of one row tile are neighbours.
  let linear_group = wid.x + wid.z * nwg.x;
  let tile_m = (linear_group / COL_TILES) * TILE_M;
  let col_tile = linear_group % COL_TILES;
{% else %}
  let tile_m = (wid.x + wid.z * nwg.x) * TILE_M;
  let col_tile = wid.y;
{% endif %}
{% endif %}
  // Column c of this invocation is output block ob0 + c * WG_X.
  let ob0 = col_tile * TILE_N + lid.x;
  let local_linear = lid.y * WG_X + lid.x;
  // Every input load of this invocation has the same K lane; loads differ by SLOT_STRIDE rows.
  let k_lane = local_linear % K_TILE;
  let m_base = tile_m + local_linear / K_TILE;

{% for c in columns %}
  let b{{ c.c }} = bias[min(ob0 + {{ c.col_offset }}u, OUT_BLOCKS - 1u)];
{% endfor %}
{% for a in accs %}
  var acc{{ a.name }} = b{{ a.c }};
{% endfor %}

{% if parity %}
{% include "igemm/parity_loads.wgsl" %}
{% elif not analytic %}
  // Per-load pixel and tap mask (0 for rows past the end), computed once.
{% for l in loads %}
  let m{{ l.j }} = m_base + {{ l.row_offset }}u;
  let pix{{ l.j }} = row_pixel(m{{ l.j }}, out_w, conv_w);
  let mask{{ l.j }} = select(0u, tap_mask(pix{{ l.j }}.y, pix{{ l.j }}.x, conv_h, conv_w), m{{ l.j }} < row_count);
{% if base_offset %}
  let parity{{ l.j }} = vec2<i32>(i32(pix{{ l.j }}.x & 1u), i32(pix{{ l.j }}.y & 1u));
{% for s in sources %}
  let base{{ s.index }}_{{ l.j }} = select(0u, base{{ s.index }}(pix{{ l.j }}.y, pix{{ l.j }}.x, conv_w), m{{ l.j }} < row_count);
{% endfor %}
{% endif %}
{% endfor %}
  var channel_block = k_lane % IN_BLOCKS;
  var filter_position = k_lane / IN_BLOCKS;
{% endif %}

{% if paired %}
  // This invocation's loads fill column 0 (even K block / weight lane) or 1 of a paired
  // shared element: the same column for every load, as the load stride is even.
  let half_lane = local_linear & 1u;
{% endif %}
{% if double_buffer %}
  // Double buffering: K tile k computes from shared half k % 2 while tile k + 1 is stored
  // into the other half and tile k + 2 is loaded into registers; one barrier per K tile.
{% elif prefetch %}
  // Register double buffering: the loads of K tile k + 1 are in flight while tile k computes.
{% endif %}
{% for step in schedule.prologue %}
{% include "igemm/tile_step.wgsl" %}
{% endfor %}
  for (var k_base = 0u; k_base < TOTAL_K; k_base += K_TILE) {
{% if double_buffer %}
    let in_cur = ((k_base / K_TILE) & 1u) * INPUT_TILE_SIZE;
    let w_cur = ((k_base / K_TILE) & 1u) * WEIGHT_TILE_SIZE;
{% endif %}
{% for step in schedule.head %}
{% include "igemm/tile_step.wgsl" %}
{% endfor %}

    let row_base = {{ row_base }};
{% for grp in groups %}
    {
{% if partials %}
{% for a in accs %}
{% for p in a.parts %}
      var {{ p }} = vec4<f16>();
{% endfor %}
{% endfor %}
{% endif %}
{% include fma_template %}
{% if partials %}
{% if chains > 1 %}
      // add each partial's f16 chains in f16, then fold the partials into the f32 accumulators
{% else %}
      // fold this group's f16 partials into the f32 accumulators
{% endif %}
{% for a in accs %}
      acc{{ a.name }} += vec4<f32>({{ a.partial_sum }});
{% endfor %}
{% endif %}
    }
{% endfor %}
{% if double_buffer %}
    // stage K tile k + 1 into the other half, load tile k + 2
{% endif %}
{% for step in schedule.tail %}
{% include "igemm/tile_step.wgsl" %}
{% endfor %}
  }

  let row0 = tile_m + lid.y * ROWS;
{% include store_template %}
}
