# ruff: noqa: N803 - Triton names constexpr parameters in capitals
"""Triton kernel of the CUDA backend's row-streaming 3x3 conv (few channels, full resolution).

The per-layer kernel (`triton_kernels.conv3x3_kernel`) loads its ``A`` operand once per tap
and its weights once per K step: with 16-64 input and 32 output channels those loads through
the L2 cache, not the tensor cores, bound it. `conv_rows_kernel` streams down a strip of
``BLOCK_W`` columns and ``ROWS`` output rows instead:

- the 9 taps' weights (``[CHANNELS, BLOCK_N]`` each, at most 36 KB) are loaded once per
  program and stay in shared memory;
- each input row is loaded once per column shift (3 loads, not 9) and feeds three
  `tl.dot` products, one per kernel row, into the accumulators of the three output rows it
  touches (rows ``i + 1``, ``i``, ``i - 1`` through kernel rows 0, 1, 2). After input row
  ``i``, output row ``i - 1`` is complete.

The loop runs over pairs of output rows (so a 2x2 max-pool sees both rows of its quads);
per pair the epilogue adds the bias, applies ReLU, then stores both rows, or their 2x2 max
(``POOL``), or, for the network tail (``PROJECT``, `fused_kernels.conv_project_kernel`'s
epilogue), the products with the final conv's per-tap weights. Each output's fp32 sum runs
over the taps in the per-layer kernel's order (tap ``3 * kh + kw``, all channels per tap), so
the stored values are the same bits as the per-layer kernel's (measured on an H200).
"""

from oidn_gpu.backends.cuda.triton_kernels import _jit, _store_final, tl, triton


@triton.jit
def _row(
    acc_hi, acc_mid, src_ptr, ws, yy, x0, offs_w, offs_k, height, width,
    HI: tl.constexpr, MID: tl.constexpr, CHANNELS: tl.constexpr, BLOCK_W: tl.constexpr,
    BLOCK_N: tl.constexpr,
):  # fmt: skip
    """Input row ``yy`` into the output rows below it (``acc_hi``: kernel row 2), at it
    (``acc_mid``: row 1) and above it (returned ``acc_lo``: row 0); ``HI``/``MID`` False
    skip those. ``ws``: the 9 taps' weights (`_weights`)."""
    acc_lo = tl.zeros((BLOCK_W, BLOCK_N), dtype=tl.float32)
    yy = yy + 0 * offs_w  # a block (Triton's interpreter mis-types scalar & block masks)
    row_ok = (yy >= 0) & (yy < height)
    for dx in tl.static_range(3):
        xx = x0 + offs_w + (dx - 1)
        ok = row_ok & (xx >= 0) & (xx < width)
        a = tl.load(
            src_ptr + (yy * width + xx)[:, None] * CHANNELS + offs_k[None, :],
            mask=ok[:, None] & (offs_k < CHANNELS)[None, :],
            other=0.0,
        )
        acc_lo = tl.dot(a, ws[dx], acc_lo)
        if MID:
            acc_mid = tl.dot(a, ws[3 + dx], acc_mid)
        if HI:
            acc_hi = tl.dot(a, ws[6 + dx], acc_hi)
    return acc_hi, acc_mid, acc_lo


@triton.jit
def _weights(w_ptr, offs_k, offs_n, w_stride, w_cols):
    """The 9 taps' ``[CHANNELS, BLOCK_N]`` weight blocks (tap ``3 * kh + kw``)."""
    w = w_ptr + offs_k[:, None] * w_cols + offs_n[None, :]
    step = w_stride * w_cols
    return (
        tl.load(w), tl.load(w + step), tl.load(w + 2 * step),
        tl.load(w + 3 * step), tl.load(w + 4 * step), tl.load(w + 5 * step),
        tl.load(w + 6 * step), tl.load(w + 7 * step), tl.load(w + 8 * step),
    )  # fmt: skip


@triton.jit
def _epilogue(acc, bias, RELU: tl.constexpr):
    acc = acc + bias[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    return acc


@triton.jit
def _store_row(out_ptr, proj, acc, y, xs, height, width, out_channels, offs_n,
               PROJECT: tl.constexpr):  # fmt: skip
    ok = (xs < width) & (y + 0 * xs < height)
    if PROJECT:
        offs_z = tl.arange(0, 32)
        z = tl.dot(acc.to(proj.dtype), proj)
        ptrs = out_ptr + (y * width + xs)[:, None] * 32 + offs_z[None, :]
        tl.store(ptrs, z.to(out_ptr.dtype.element_ty), mask=ok[:, None])
    else:
        ptrs = out_ptr + (y * width + xs)[:, None] * out_channels + offs_n[None, :]
        mask = ok[:, None] & (offs_n < out_channels)[None, :]
        tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@_jit("height", "width")
def conv_rows_kernel(
    src_ptr, w_ptr, bias_ptr, proj_ptr, out_ptr,
    height, width, w_stride, w_cols, out_channels,
    RELU: tl.constexpr, POOL: tl.constexpr, PROJECT: tl.constexpr, CHANNELS: tl.constexpr,
    BLOCK_W: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
):  # fmt: skip
    """Output rows ``[pid_y * ROWS, +ROWS)`` x columns ``[pid_x * BLOCK_W, +BLOCK_W)``.

    ``src`` is NHWC ``[height, width, CHANNELS]`` (16, 32 or 64: one K step per tap); ``w``
    the packed ``[9 * w_stride, w_cols]`` weights (`layout.pack_weights`); ``out`` NHWC with
    ``out_channels`` (pooled with ``POOL``), or with ``PROJECT`` the ``[height, width, 32]``
    per-tap partial sums of the final conv (``proj``: ``[BLOCK_N, 32]``,
    `fusion.project_weights`).
    """
    x0 = tl.program_id(0) * BLOCK_W
    y0 = tl.program_id(1) * ROWS
    offs_w = tl.arange(0, BLOCK_W)
    offs_k = tl.arange(0, CHANNELS)
    offs_n = tl.arange(0, BLOCK_N)
    xs = x0 + offs_w
    bias = tl.load(bias_ptr + offs_n)
    if PROJECT:
        proj = tl.load(proj_ptr + offs_n[:, None] * 32 + tl.arange(0, 32)[None, :])
    else:
        proj = bias  # unused
    ws = _weights(w_ptr, offs_k, offs_n, w_stride, w_cols)
    zero = tl.zeros((BLOCK_W, BLOCK_N), dtype=tl.float32)
    # prime: input rows y0 - 1 and y0 start output rows y0 and y0 + 1
    _, _, acc_a = _row(zero, zero, src_ptr, ws, y0 - 1, x0, offs_w, offs_k, height, width,
                       False, False, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
    _, acc_a, acc_b = _row(zero, acc_a, src_ptr, ws, y0, x0, offs_w, offs_k, height, width,
                           False, True, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
    for pair in range(0, ROWS // 2):
        y = y0 + 2 * pair  # the output rows y, y + 1 complete in this step
        top, acc_b, acc_c = _row(acc_a, acc_b, src_ptr, ws, y + 1, x0, offs_w, offs_k, height,
                                 width, True, True, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
        top = _epilogue(top, bias, RELU)
        if not POOL:  # stored now: one accumulator fewer held across the next row
            _store_row(out_ptr, proj, top, y, xs, height, width, out_channels, offs_n, PROJECT)
        bottom, acc_c, acc_d = _row(acc_b, acc_c, src_ptr, ws, y + 2, x0, offs_w, offs_k,
                                    height, width, True, True, CHANNELS, BLOCK_W,
                                    BLOCK_N)  # fmt: skip
        bottom = _epilogue(bottom, bias, RELU)
        if POOL:
            pooled = tl.max(tl.reshape(tl.maximum(top, bottom), (BLOCK_W // 2, 2, BLOCK_N)), 1)
            qx = x0 // 2 + tl.arange(0, BLOCK_W // 2)
            _store_row(out_ptr, proj, pooled, y // 2, qx, height // 2, width // 2,
                       out_channels, offs_n, False)  # fmt: skip
        else:
            _store_row(out_ptr, proj, bottom, y + 1, xs, height, width, out_channels, offs_n,
                       PROJECT)  # fmt: skip
        acc_a = acc_c
        acc_b = acc_d


@triton.jit
def _tap(z, cols, shift, SHIFT: tl.constexpr):
    """One tap's 4 columns of ``z`` (``cols``: `fusion.z_column`'s, ``[BLOCK_W, 4]``), taken
    ``SHIFT`` pixels to the right (``shift``: each lane's source lane)."""
    tap = tl.gather(z, cols, 1)
    if SHIFT:
        tap = tl.gather(tap, shift, 0)
    return tap.to(tl.float32)


@triton.jit
def _final_taps(
    hidden, hy, xs, height, width, proj, acc_done, acc_mid, offs_w, offs_4,
    Z_FP32: tl.constexpr, BLOCK_W: tl.constexpr,
):  # fmt: skip
    """Hidden row ``hy`` into the final conv's sums: the output row above it is complete
    (returned first: ``acc_done`` plus its taps 6-8), the one at it gets taps 3-5
    (``acc_mid``), the one below starts with taps 0-2. Each sum adds tap after tap in
    `fused_kernels.tap_sum_kernel`'s order, of the same fp16 partial sums."""
    inside = (xs >= 0) & (xs < width) & (hy + 0 * xs >= 0) & (hy + 0 * xs < height)
    hidden = tl.where(inside[:, None], hidden, 0.0)  # the final conv's zero padding
    z = tl.dot(hidden.to(proj.dtype), proj)
    if not Z_FP32:  # the two-kernel form's partial sums are stored in the hidden dtype
        z = z.to(proj.dtype)
    base = offs_4[None, :] + 0 * offs_w[:, None]
    shift1 = tl.minimum(offs_w + 1, BLOCK_W - 1)[:, None] + 0 * offs_4[None, :]
    shift2 = tl.minimum(offs_w + 2, BLOCK_W - 1)[:, None] + 0 * offs_4[None, :]
    tap8 = 4 * base + 3  # tap 8's three values: the fourth column of taps 0-2
    done = acc_done + _tap(z, 4 * 6 + base, shift1, False)
    done = done + _tap(z, 4 * 7 + base, shift1, True)
    done = done + _tap(z, tap8, shift2, True)
    mid = acc_mid + _tap(z, 4 * 3 + base, shift1, False)
    mid = mid + _tap(z, 4 * 4 + base, shift1, True)
    mid = mid + _tap(z, 4 * 5 + base, shift2, True)
    new = tl.zeros((BLOCK_W, 4), dtype=tl.float32) + _tap(z, base, shift1, False)
    new = new + _tap(z, 4 * 1 + base, shift1, True)
    new = new + _tap(z, 4 * 2 + base, shift2, True)
    return done, mid, new


@_jit("height", "width", "out_offset", "out_pixel_stride", "out_row_stride", "keep_y",
      "keep_x", "keep_h", "keep_w", "dst_y", "dst_x")  # fmt: skip
def conv_rows_final_kernel(
    src_ptr, w_ptr, bias_ptr, proj_ptr, final_bias_ptr, out_ptr,
    height, width, w_stride, w_cols,
    scale_ptr, out_offset, out_pixel_stride, out_row_stride,
    keep_y, keep_x, keep_h, keep_w, dst_y, dst_x,
    RELU: tl.constexpr, FINAL_RELU: tl.constexpr, Z_FP32: tl.constexpr,
    CHANNELS: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_N: tl.constexpr, ROWS: tl.constexpr,
    OUTPUT_PASS: tl.constexpr, TRANSFER: tl.constexpr, HDR: tl.constexpr,
    SNORM: tl.constexpr, OUT_CHANNELS: tl.constexpr,
):  # fmt: skip
    """The network's tail in one kernel: the hidden conv (``conv_rows_kernel``'s rows), the
    final conv's per-tap partial sums (``PROJECT``) and their 9-tap sum with the output pass
    (`fused_kernels.tap_sum_kernel`), the partial sums never stored.

    A program's strip of ``BLOCK_W`` hidden columns starts one column left of its
    ``BLOCK_W - 2`` output columns, and its ``ROWS + 2`` hidden rows one row above its
    ``ROWS`` output rows: the final conv's halo is recomputed by the neighbours. Each
    hidden row's partial sums ``z`` reach the output rows above, at and below it in
    registers (a column shift is a gather along the strip), so every output adds the
    same fp16 partial sums in the same tap order as the two-kernel form: the same bits.
    """
    ox0 = tl.program_id(0) * (BLOCK_W - 2)
    x0 = ox0 - 1  # the strip's first hidden column
    y0 = tl.program_id(1) * ROWS - 1  # its first hidden row
    offs_w = tl.arange(0, BLOCK_W)
    offs_k = tl.arange(0, CHANNELS)
    offs_n = tl.arange(0, BLOCK_N)
    offs_4 = tl.arange(0, 4)
    xs = x0 + offs_w
    out_x = ox0 + offs_w
    out_ok = (offs_w < BLOCK_W - 2) & (out_x < width)
    first = y0 + 1
    bias = tl.load(bias_ptr + offs_n)
    final_bias = tl.load(final_bias_ptr + offs_4)
    proj = tl.load(proj_ptr + offs_n[:, None] * 32 + tl.arange(0, 32)[None, :])
    ws = _weights(w_ptr, offs_k, offs_n, w_stride, w_cols)
    zero = tl.zeros((BLOCK_W, BLOCK_N), dtype=tl.float32)
    done = tl.zeros((BLOCK_W, 4), dtype=tl.float32)
    mid = tl.zeros((BLOCK_W, 4), dtype=tl.float32)
    _, _, acc_a = _row(zero, zero, src_ptr, ws, y0 - 1, x0, offs_w, offs_k, height, width,
                       False, False, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
    _, acc_a, acc_b = _row(zero, acc_a, src_ptr, ws, y0, x0, offs_w, offs_k, height, width,
                           False, True, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
    for pair in range(0, ROWS // 2 + 1):
        y = y0 + 2 * pair  # the hidden rows y, y + 1 complete in this step
        top, acc_b, acc_c = _row(acc_a, acc_b, src_ptr, ws, y + 1, x0, offs_w, offs_k, height,
                                 width, True, True, CHANNELS, BLOCK_W, BLOCK_N)  # fmt: skip
        top = _epilogue(top, bias, RELU)
        done, mid, new = _final_taps(top, y, xs, height, width, proj, done, mid, offs_w,
                                     offs_4, Z_FP32, BLOCK_W)  # fmt: skip
        _final_row(done, final_bias, y - 1, out_x, out_ok, first, ROWS, height, out_ptr,
                   scale_ptr, out_offset, out_pixel_stride, out_row_stride, keep_y, keep_x,
                   keep_h, keep_w, dst_y, dst_x, offs_4, FINAL_RELU, OUTPUT_PASS, TRANSFER,
                   HDR, SNORM, OUT_CHANNELS)  # fmt: skip
        bottom, acc_c, acc_d = _row(acc_b, acc_c, src_ptr, ws, y + 2, x0, offs_w, offs_k,
                                    height, width, True, True, CHANNELS, BLOCK_W,
                                    BLOCK_N)  # fmt: skip
        bottom = _epilogue(bottom, bias, RELU)
        done, mid, new = _final_taps(bottom, y + 1, xs, height, width, proj, mid, new, offs_w,
                                     offs_4, Z_FP32, BLOCK_W)  # fmt: skip
        _final_row(done, final_bias, y, out_x, out_ok, first, ROWS, height, out_ptr,
                   scale_ptr, out_offset, out_pixel_stride, out_row_stride, keep_y, keep_x,
                   keep_h, keep_w, dst_y, dst_x, offs_4, FINAL_RELU, OUTPUT_PASS, TRANSFER,
                   HDR, SNORM, OUT_CHANNELS)  # fmt: skip
        done = mid
        mid = new
        acc_a = acc_c
        acc_b = acc_d


@triton.jit
def _final_row(
    acc, final_bias, y, xs, ok, first, ROWS: tl.constexpr, height, out_ptr, scale_ptr,
    out_offset, out_pixel_stride, out_row_stride, keep_y, keep_x, keep_h, keep_w, dst_y, dst_x,
    offs_4, RELU: tl.constexpr, OUTPUT_PASS: tl.constexpr, TRANSFER: tl.constexpr,
    HDR: tl.constexpr, SNORM: tl.constexpr, OUT_CHANNELS: tl.constexpr,
):  # fmt: skip
    """Output row ``y`` (its 9 taps summed): bias, ReLU, the output pass, stored if it is
    one of the program's rows."""
    acc = acc + final_bias[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    rows = y + 0 * xs
    ok = ok & (rows >= first) & (rows < first + ROWS) & (rows < height)
    _store_final(
        acc, offs_4, rows, xs, ok, out_ptr, scale_ptr, out_offset, out_pixel_stride,
        out_row_stride, keep_y, keep_x, keep_h, keep_w, dst_y, dst_x,
        OUTPUT_PASS, TRANSFER, HDR, SNORM, OUT_CHANNELS,
    )  # fmt: skip
