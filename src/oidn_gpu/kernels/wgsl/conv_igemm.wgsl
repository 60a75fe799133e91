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

{% if unpack %}
// Four halfs stored as vec2<u32> (the same 8 bytes as vec4<f16>). unpack2x16float widens
// exactly, so the round trip through f32 keeps every bit of the stored halfs.
fn unpack_f16x4(p: vec2<u32>) -> vec4<f16> {
  return vec4<f16>(vec4<f32>(unpack2x16float(p.x), unpack2x16float(p.y)));
}

{% endif %}
{% for s in sources %}
// Source {{ s.index }} at conv-resolution pixel (iy, ix), block b{{ s.note }}.
fn fetch{{ s.index }}(iy: u32, ix: u32, b: u32, conv_w: u32) -> {{ act_type }} {
  let index = {{ s.index_expr }};
  return {{ s.load }};
}

{% if base_offset %}
// Source {{ s.index }} relative to a cached pixel base: tap (ky, kx), parity (py, px) of the pixel.
fn fetch_base{{ s.index }}(base: u32, parity: vec2<i32>, tap: u32, b: u32, conv_w: u32) -> {{ act_type }} {
  let ky = i32(tap / 3u);
  let kx = i32(tap % 3u);
{% if s.upsample %}
  let dy = (parity.y + ky - 1) >> 1u;
  let dx = (parity.x + kx - 1) >> 1u;
  let offset = (dy * i32(conv_w / 2u) + dx) * i32({{ s.blocks }});
{% else %}
  let offset = ((ky - 1) * i32(conv_w) + kx - 1) * i32({{ s.blocks }});
{% endif %}
  let index = u32(i32(base) + offset) + b;
  return {{ s.load }};
}

// Block base of source {{ s.index }} at conv-resolution pixel (y, x).
fn base{{ s.index }}(y: u32, x: u32, conv_w: u32) -> u32 {
  return {{ s.base_expr }};
}

{% endif %}
{% endfor %}
fn fetch_weight(index: u32) -> {{ act_type }} {
  return {{ weight_load }};
}

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

{% if not analytic %}
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

{% macro lane(kb) %}
{% if analytic %}
      let k = {{ kb }} + k_lane;
      let k_ok = k < TOTAL_K;
      let tap = k / IN_BLOCKS;
      let ib = k % IN_BLOCKS;
{% else %}
      let tap = filter_position;
      let ib = channel_block;
      let k_ok = tap < 9u;
{% endif %}
{% endmacro %}
{% macro load_ok(l) %}
{% if analytic %}
        let m = m_base + {{ l.row_offset }}u;
        let pix = row_pixel(m, out_w, conv_w);
        let ok = k_ok && m < row_count && ((tap_mask(pix.y, pix.x, conv_h, conv_w) >> tap) & 1u) != 0u;
{% else %}
        let pix = pix{{ l.j }};
        let ok = k_ok && ((mask{{ l.j }} >> tap) & 1u) != 0u;
{% endif %}
{% endmacro %}
{% macro fetch_tile(kb) %}
    // global loads of the K tile at {{ kb }} into registers (zeros outside the tensor)
    {
      {{ lane(kb) | trim }}
{% if source_first %}
{% for s in sources %}
      {{ s.branch }} (ib < {{ s.end }}) {
        let sb = ib - {{ s.offset }};
{% for l in loads %}
        {
        {{ load_ok(l) | trim }}
          var v = {{ act_type }}();
          if (ok) {
            v = {{ l.fetch_in_source[s.index] }};
          }
          in{{ l.j }} = v;
        }
{% endfor %}
{% endfor %}
      } else {
        // K past the end (only when IN_BLOCKS and the K tile do not align): zeros
{% for l in loads %}
        in{{ l.j }} = {{ act_type }}();
{% endfor %}
      }
{% else %}
{% for l in loads %}
      {
        {{ load_ok(l) | trim }}
        var v = {{ act_type }}();
        if (ok) {
{% for s in sources %}
          {{ s.branch }} (ib < {{ s.end }}) {
            v = {{ l.fetch[s.index] }};
{% endfor %}
          }
        }
        in{{ l.j }} = v;
      }
{% endfor %}
{% endif %}
{% for l in weight_loads %}
      {
        let li = local_linear + {{ l.offset }}u;
        let tk = li / (TILE_N * 4u);
        let rem = li % (TILE_N * 4u);
        let wob = col_tile * TILE_N + rem / 4u;
        let wk = {{ kb }} + tk;
        var w = {{ act_type }}();
        if (wob < OUT_BLOCKS && wk < TOTAL_K) {
          w = fetch_weight({{ weight_index }});
        }
        wt{{ l.j }} = w;
      }
{% endfor %}
    }
{% endmacro %}
{% macro store_tile(ibuf="", wbuf="") %}
{% for l in loads %}
{% if paired %}
    input_tile[{{ ibuf }}input_slot(local_linear + {{ l.offset }}u)][half_lane] = in{{ l.j }};
{% else %}
    input_tile[{{ ibuf }}input_slot(local_linear + {{ l.offset }}u)] = in{{ l.j }};
{% endif %}
{% endfor %}
{% for l in weight_loads %}
{% if paired %}
    weight_tile[{{ wbuf }}weight_slot(local_linear + {{ l.offset }}u)][half_lane] = wt{{ l.j }};
{% else %}
    weight_tile[{{ wbuf }}weight_slot(local_linear + {{ l.offset }}u)] = wt{{ l.j }};
{% endif %}
{% endfor %}
{% endmacro %}
{% macro advance() %}
{% if not analytic %}
    // advance this invocation's K lane by one K tile (at most one carry)
    channel_block += K_ADVANCE_BLOCKS;
    let carry = channel_block >= IN_BLOCKS;
    channel_block -= select(0u, IN_BLOCKS, carry);
    filter_position += K_ADVANCE_TAPS + select(0u, 1u, carry);
{% endif %}
{% endmacro %}
{% macro declare_tile_registers(pad) %}
{% for l in loads %}
{{ pad }}var in{{ l.j }} = {{ act_type }}();
{% endfor %}
{% for l in weight_loads %}
{{ pad }}var wt{{ l.j }} = {{ act_type }}();
{% endfor %}
{% endmacro %}
{% if paired %}
  // This invocation's loads fill column 0 (even K block / weight lane) or 1 of a paired
  // shared element: the same column for every load, as the load stride is even.
  let half_lane = local_linear & 1u;
{% endif %}
{% if double_buffer %}
  // Double buffering: K tile k computes from shared half k % 2 while tile k + 1 is stored
  // into the other half and tile k + 2 is loaded into registers; one barrier per K tile.
  {{ declare_tile_registers("  ") | trim }}
  {{ fetch_tile("0u") | trim }}
  {{ store_tile() | trim }}
  workgroupBarrier();
  {{ advance() | trim }}
  {{ fetch_tile("K_TILE") | trim }}
{% elif prefetch %}
  // Register double buffering: the loads of K tile k + 1 are in flight while tile k computes.
  {{ declare_tile_registers("  ") | trim }}
  {{ fetch_tile("0u") | trim }}
{% endif %}
  for (var k_base = 0u; k_base < TOTAL_K; k_base += K_TILE) {
{% if double_buffer %}
    let in_cur = ((k_base / K_TILE) & 1u) * INPUT_TILE_SIZE;
    let w_cur = ((k_base / K_TILE) & 1u) * WEIGHT_TILE_SIZE;
{% elif prefetch %}
    {{ store_tile() | trim }}
    workgroupBarrier();
    {{ advance() | trim }}
    {{ fetch_tile("k_base + K_TILE") | trim }}
{% else %}
    {{ declare_tile_registers("    ") | trim }}
    {{ fetch_tile("k_base") | trim }}
    {{ store_tile() | trim }}
    workgroupBarrier();
{% endif %}

    let row_base = lid.y * INPUT_ROW_STRIDE{{ " + in_cur" if double_buffer else "" }};
{% for grp in groups %}
    {
{% if f16 %}
{% for a in accs %}
      var part{{ a.name }} = vec4<f16>();
{% endfor %}
{% endif %}
{% if row_major and paired %}
{% for r in grp.rows %}
{% for s in r.spairs %}
      {
        let pv = input_tile[row_base + {{ s.poffset }}u];
        let va = pv[0];
        let vb = pv[1];
{% for c in r.cols %}
        {
          let wa = ({{ s.tk0 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wb = ({{ s.tk1 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
          let wa01 = weight_tile[wa];
          let wa23 = weight_tile[wa + 1u];
          let wb01 = weight_tile[wb];
          let wb23 = weight_tile[wb + 1u];
          {{ c.target }} = fma(wa01[0], vec4<f16>(va.x), {{ c.target }});
          {{ c.target }} = fma(wa01[1], vec4<f16>(va.y), {{ c.target }});
          {{ c.target }} = fma(wa23[0], vec4<f16>(va.z), {{ c.target }});
          {{ c.target }} = fma(wa23[1], vec4<f16>(va.w), {{ c.target }});
          {{ c.target }} = fma(wb01[0], vec4<f16>(vb.x), {{ c.target }});
          {{ c.target }} = fma(wb01[1], vec4<f16>(vb.y), {{ c.target }});
          {{ c.target }} = fma(wb23[0], vec4<f16>(vb.z), {{ c.target }});
          {{ c.target }} = fma(wb23[1], vec4<f16>(vb.w), {{ c.target }});
        }
{% endfor %}
      }
{% endfor %}
{% endfor %}
{% elif row_major %}
{% for r in grp.rows %}
{% for s in r.steps %}
      {
        let v = input_tile[row_base + {{ s.offset }}u];
{% for c in r.cols %}
        let wb{{ c.c }} = ({{ s.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        {{ c.target }} = fma(weight_tile[wb{{ c.c }}], {{ vec }}(v.x), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 1u], {{ vec }}(v.y), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 2u], {{ vec }}(v.z), {{ c.target }});
        {{ c.target }} = fma(weight_tile[wb{{ c.c }} + 3u], {{ vec }}(v.w), {{ c.target }});
{% endfor %}
      }
{% endfor %}
{% endfor %}
{% elif paired %}
{% for kp in grp.kpairs %}
      {
        // K blocks {{ kp.tk0 }} and {{ kp.tk1 }}: one 16-byte load per row and per weight pair
{% for c in columns %}
        let wa{{ c.c }} = ({{ kp.tk0 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let wb{{ c.c }} = ({{ kp.tk1 }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let wa{{ c.c }}_01 = weight_tile[wa{{ c.c }}];
        let wa{{ c.c }}_23 = weight_tile[wa{{ c.c }} + 1u];
        let wb{{ c.c }}_01 = weight_tile[wb{{ c.c }}];
        let wb{{ c.c }}_23 = weight_tile[wb{{ c.c }} + 1u];
        let w{{ c.c }}_0 = wa{{ c.c }}_01[0];
        let w{{ c.c }}_1 = wa{{ c.c }}_01[1];
        let w{{ c.c }}_2 = wa{{ c.c }}_23[0];
        let w{{ c.c }}_3 = wa{{ c.c }}_23[1];
        let x{{ c.c }}_0 = wb{{ c.c }}_01[0];
        let x{{ c.c }}_1 = wb{{ c.c }}_01[1];
        let x{{ c.c }}_2 = wb{{ c.c }}_23[0];
        let x{{ c.c }}_3 = wb{{ c.c }}_23[1];
{% endfor %}
{% for r in kp.rows %}
        let p{{ r.r }} = input_tile[row_base + {{ r.poffset }}u];
        let v{{ r.r }} = p{{ r.r }}[0];
        let u{{ r.r }} = p{{ r.r }}[1];
{% for c in r.cols %}
        {{ c.target }} = fma(w{{ c.c }}_0, vec4<f16>(v{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_1, vec4<f16>(v{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_2, vec4<f16>(v{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_3, vec4<f16>(v{{ r.r }}.w), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_0, vec4<f16>(u{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_1, vec4<f16>(u{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_2, vec4<f16>(u{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(x{{ c.c }}_3, vec4<f16>(u{{ r.r }}.w), {{ c.target }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
{% else %}
{% for step in grp.ksteps %}
      {
{% for c in columns %}
        let wb{{ c.c }} = ({{ step.tk }}u * TILE_N + lid.x + {{ c.col_offset }}u) * W_STRIDE{{ wcur }};
        let w{{ c.c }}_0 = weight_tile[wb{{ c.c }}];
        let w{{ c.c }}_1 = weight_tile[wb{{ c.c }} + 1u];
        let w{{ c.c }}_2 = weight_tile[wb{{ c.c }} + 2u];
        let w{{ c.c }}_3 = weight_tile[wb{{ c.c }} + 3u];
{% endfor %}
{% for r in step.rows %}
        let v{{ r.r }} = input_tile[row_base + {{ r.offset }}u];
{% for c in r.cols %}
        {{ c.target }} = fma(w{{ c.c }}_0, {{ vec }}(v{{ r.r }}.x), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_1, {{ vec }}(v{{ r.r }}.y), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_2, {{ vec }}(v{{ r.r }}.z), {{ c.target }});
        {{ c.target }} = fma(w{{ c.c }}_3, {{ vec }}(v{{ r.r }}.w), {{ c.target }});
{% endfor %}
{% endfor %}
      }
{% endfor %}
{% endif %}
{% if f16 %}
      // fold this group's f16 partials into the f32 accumulators
{% for a in accs %}
      acc{{ a.name }} += vec4<f32>(part{{ a.name }});
{% endfor %}
{% endif %}
    }
{% endfor %}
{% if double_buffer %}
    // stage K tile k + 1 into the other half, load tile k + 2
    {{ store_tile("INPUT_TILE_SIZE - in_cur + ", "WEIGHT_TILE_SIZE - w_cur + ") | trim }}
    {{ advance() | trim }}
    {{ fetch_tile("k_base + 2u * K_TILE") | trim }}
{% endif %}
    workgroupBarrier();
{% if not prefetch %}
    {{ advance() | trim }}
{% endif %}
  }

  let row0 = tile_m + lid.y * ROWS;
{% if pool_pairs %}
  // Rows row0, row0 + 1 are the top (even lid.y) or bottom (odd lid.y) pair of a quad.
{% for c in columns %}
  let half{{ c.c }} = max(activate(acc0_{{ c.c }}), activate(acc1_{{ c.c }}));
  if ((lid.y & 1u) == 1u) {
    pool_half[((lid.y / 2u) * WG_X + lid.x) * COLS + {{ c.c }}u] = half{{ c.c }};
  }
{% endfor %}
  workgroupBarrier();
  if ((lid.y & 1u) == 0u) {
    let p = row0 / 4u;
{% for c in columns %}
    let out_ob{{ c.c }} = ob0 + {{ c.col_offset }}u;
    if (out_ob{{ c.c }} < OUT_BLOCKS && p < out_h * out_w) {
      let m = max(half{{ c.c }}, pool_half[((lid.y / 2u) * WG_X + lid.x) * COLS + {{ c.c }}u]);
      output[p * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(m);
    }
{% endfor %}
  }
{% else %}
{% for c in columns %}
  let out_ob{{ c.c }} = ob0 + {{ c.col_offset }}u;
  if (out_ob{{ c.c }} < OUT_BLOCKS) {
{% if pool %}
{% for g in pool_groups %}
    {
      let p = row0 / 4u + {{ g.g }}u;
      if (p < out_h * out_w) {
        var m = activate(acc{{ g.r0 }}_{{ c.c }});
        m = max(m, activate(acc{{ g.r1 }}_{{ c.c }}));
        m = max(m, activate(acc{{ g.r2 }}_{{ c.c }}));
        m = max(m, activate(acc{{ g.r3 }}_{{ c.c }}));
        output[p * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(m);
      }
    }
{% endfor %}
{% else %}
{% for r in rows %}
    if (row0 + {{ r.r }}u < row_count) {
      output[(row0 + {{ r.r }}u) * OUT_BLOCKS + out_ob{{ c.c }}] = to_output(activate(acc{{ r.r }}_{{ c.c }}));
    }
{% endfor %}
{% endif %}
  }
{% endfor %}
{% endif %}
}
