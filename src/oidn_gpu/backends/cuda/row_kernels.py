# ruff: noqa: N803, SIM108 - Triton names constexpr parameters in capitals; branches on constexprs
"""Triton kernel of the CUDA backend's row-streaming 3x3 conv (few channels, full resolution).

The per-layer kernel (`triton_kernels.conv3x3_kernel`) loads its ``A`` operand once per tap
and its weights once per K step: with 16-64 input and 32 output channels those loads through
the L2 cache, not the tensor cores, bound it. `conv_rows_kernel` streams down a strip of
``BLOCK_W`` columns and ``rows`` output rows instead:

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

from oidn_gpu.backends.cuda.triton_kernels import _jit, tl, triton


@triton.jit
def _row(
    acc_hi,
    acc_mid,
    src_ptr,
    ws,
    yy,
    x0,
    offs_w,
    offs_k,
    height,
    width,
    HI: tl.constexpr,
    MID: tl.constexpr,
    CHANNELS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
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
        tl.load(w),
        tl.load(w + step),
        tl.load(w + 2 * step),
        tl.load(w + 3 * step),
        tl.load(w + 4 * step),
        tl.load(w + 5 * step),
        tl.load(w + 6 * step),
        tl.load(w + 7 * step),
        tl.load(w + 8 * step),
    )


@triton.jit
def _epilogue(acc, bias, RELU: tl.constexpr):
    acc = acc + bias[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    return acc


@triton.jit
def _store_row(
    out_ptr, proj, acc, y, xs, height, width, out_channels, offs_n, PROJECT: tl.constexpr
):
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


@_jit("height", "width", "rows")
def conv_rows_kernel(
    src_ptr,
    w_ptr,
    bias_ptr,
    proj_ptr,
    out_ptr,
    height,
    width,
    w_stride,
    w_cols,
    out_channels,
    rows,
    RELU: tl.constexpr,
    POOL: tl.constexpr,
    PROJECT: tl.constexpr,
    CHANNELS: tl.constexpr,
    BLOCK_W: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    """Output rows ``[pid_y * rows, +rows)`` x columns ``[pid_x * BLOCK_W, +BLOCK_W)``
    (``rows`` even: a run-time value, so that any rows per program (`row_conv.balance`)
    runs the same compiled kernel).

    ``src`` is NHWC ``[height, width, CHANNELS]`` (16, 32 or 64: one K step per tap); ``w``
    the packed ``[9 * w_stride, w_cols]`` weights (`layout.pack_weights`); ``out`` NHWC with
    ``out_channels`` (pooled with ``POOL``), or with ``PROJECT`` the ``[height, width, 32]``
    per-tap partial sums of the final conv (``proj``: ``[BLOCK_N, 32]``,
    `fusion.project_weights`).
    """
    x0 = tl.program_id(0) * BLOCK_W
    y0 = tl.program_id(1) * rows
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
    _, _, acc_a = _row(
        zero,
        zero,
        src_ptr,
        ws,
        y0 - 1,
        x0,
        offs_w,
        offs_k,
        height,
        width,
        False,
        False,
        CHANNELS,
        BLOCK_W,
        BLOCK_N,
    )
    _, acc_a, acc_b = _row(
        zero,
        acc_a,
        src_ptr,
        ws,
        y0,
        x0,
        offs_w,
        offs_k,
        height,
        width,
        False,
        True,
        CHANNELS,
        BLOCK_W,
        BLOCK_N,
    )
    for pair in range(0, rows // 2):
        y = y0 + 2 * pair  # the output rows y, y + 1 complete in this step
        top, acc_b, acc_c = _row(
            acc_a,
            acc_b,
            src_ptr,
            ws,
            y + 1,
            x0,
            offs_w,
            offs_k,
            height,
            width,
            True,
            True,
            CHANNELS,
            BLOCK_W,
            BLOCK_N,
        )
        top = _epilogue(top, bias, RELU)
        if not POOL:  # stored now: one accumulator fewer held across the next row
            _store_row(out_ptr, proj, top, y, xs, height, width, out_channels, offs_n, PROJECT)
        bottom, acc_c, acc_d = _row(
            acc_b,
            acc_c,
            src_ptr,
            ws,
            y + 2,
            x0,
            offs_w,
            offs_k,
            height,
            width,
            True,
            True,
            CHANNELS,
            BLOCK_W,
            BLOCK_N,
        )
        bottom = _epilogue(bottom, bias, RELU)
        if POOL:
            pooled = tl.max(tl.reshape(tl.maximum(top, bottom), (BLOCK_W // 2, 2, BLOCK_N)), 1)
            qx = x0 // 2 + tl.arange(0, BLOCK_W // 2)
            _store_row(
                out_ptr,
                proj,
                pooled,
                y // 2,
                qx,
                height // 2,
                width // 2,
                out_channels,
                offs_n,
                False,
            )
        else:
            _store_row(
                out_ptr, proj, bottom, y + 1, xs, height, width, out_channels, offs_n, PROJECT
            )
        acc_a = acc_c
        acc_b = acc_d
