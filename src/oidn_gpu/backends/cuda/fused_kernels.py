# ruff: noqa: N803 - Triton names constexpr parameters in capitals
"""Triton kernel of the CUDA backend's fused network tail: last hidden conv, final conv, output.

`conv_tail_kernel` runs the last two convs of the network (``dec_conv1b`` and
``dec_conv0`` of the OIDN U-Nets: 64 -> 32 -> 3 channels at full resolution) and
the output pass in one launch, so the hidden activation between them never
becomes a full-resolution tensor in device memory.

Each program is persistent: it walks output tiles ``tile = pid, pid + P, ...``
of ``(REGION_H - 2) x (REGION_W - 2)`` pixels. Per tile it

1. computes the hidden conv (bias, ReLU) over the tile with a one-pixel halo,
   a ``REGION_H x REGION_W`` rectangle, in chunks of ``BLOCK_M`` pixels
   (`triton_kernels._accumulate`, the per-layer kernel's K loop); pixels
   outside the image are stored as zeros (the final conv's zero padding);
2. stores it as fp16/bf16 into the program's own scratch rectangle (a few tens
   of kilobytes per program, the same memory for every tile of the program, so it
   stays in the L2 cache); the halo is recomputed by the neighbouring tiles;
3. after a barrier, computes the final conv of the tile's inner pixels from the
   scratch rectangle and stores them through the output pass
   (`triton_kernels._store_final`, as the per-layer final conv does).

A second barrier keeps the next tile's stores from overwriting what slower
threads still read. Tiles are 2D, so the hidden conv's 9 taps re-read far less
of its input than the per-layer kernel's rows of pixels do.
"""

from oidn_gpu.backends.cuda.triton_kernels import _accumulate, _jit, _store_final, tl


@_jit(
    "height",
    "width",
    "tiles_w",
    "num_tiles",
    "out_offset",
    "out_pixel_stride",
    "out_row_stride",
    "keep_y",
    "keep_x",
    "keep_h",
    "keep_w",
    "dst_y",
    "dst_x",
)
def conv_tail_kernel(
    src_ptr,
    w1_ptr,
    b1_ptr,
    w2_ptr,
    b2_ptr,
    scratch_ptr,
    out_ptr,
    height,
    width,
    channels,
    w1_stride,
    w1_cols,
    w2_stride,
    w2_cols,
    tiles_w,
    num_tiles,
    scale_ptr,
    out_offset,
    out_pixel_stride,
    out_row_stride,
    keep_y,
    keep_x,
    keep_h,
    keep_w,
    dst_y,
    dst_x,
    RELU1: tl.constexpr,
    RELU2: tl.constexpr,
    OUTPUT_PASS: tl.constexpr,
    TRANSFER: tl.constexpr,
    HDR: tl.constexpr,
    SNORM: tl.constexpr,
    OUT_CHANNELS: tl.constexpr,
    REGION_H: tl.constexpr,
    REGION_W: tl.constexpr,
    BLOCK_M: tl.constexpr,
    MID: tl.constexpr,
    BLOCK_K1: tl.constexpr,
    TAPS1: tl.constexpr,
    BLOCK_K2: tl.constexpr,
    TAPS2: tl.constexpr,
):
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    region: tl.constexpr = REGION_H * REGION_W
    offs_m = tl.arange(0, BLOCK_M)
    offs_mid = tl.arange(0, MID)
    offs_out = tl.arange(0, 16)
    scratch = scratch_ptr + pid * (region * MID)
    bias1 = tl.load(b1_ptr + offs_mid)
    bias2 = tl.load(b2_ptr + offs_out)
    for tile in range(pid, num_tiles, programs):
        tile_y = tile // tiles_w
        y0 = tile_y * (REGION_H - 2) - 1
        x0 = (tile - tile_y * tiles_w) * (REGION_W - 2) - 1
        for chunk in range(0, region // BLOCK_M):
            r = chunk * BLOCK_M + offs_m
            y = y0 + r // REGION_W
            x = x0 + r % REGION_W
            inside = (y >= 0) & (y < height) & (x >= 0) & (x < width)
            acc = tl.zeros((BLOCK_M, MID), dtype=tl.float32)
            acc = _accumulate(
                acc,
                src_ptr,
                w1_ptr,
                0,
                y,
                x,
                inside,
                height,
                width,
                channels,
                w1_stride,
                w1_cols,
                offs_mid,
                False,
                BLOCK_K1,
                TAPS1,
            )
            acc = acc + bias1[None, :]
            if RELU1:
                acc = tl.maximum(acc, 0.0)
            acc = tl.where(inside[:, None], acc, 0.0)
            ptrs = scratch + r[:, None] * MID + offs_mid[None, :]
            tl.store(ptrs, acc.to(scratch_ptr.dtype.element_ty))
        tl.debug_barrier()
        for chunk in range(0, region // BLOCK_M):
            r = chunk * BLOCK_M + offs_m
            ry = r // REGION_W
            rx = r % REGION_W
            y = y0 + ry
            x = x0 + rx
            ok = (ry >= 1) & (ry < REGION_H - 1) & (rx >= 1) & (rx < REGION_W - 1)
            ok = ok & (y < height) & (x < width)
            acc = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
            acc = _accumulate(
                acc,
                scratch,
                w2_ptr,
                0,
                ry,
                rx,
                ok,
                REGION_H,
                REGION_W,
                MID,
                w2_stride,
                w2_cols,
                offs_out,
                False,
                BLOCK_K2,
                TAPS2,
            )
            acc = acc + bias2[None, :]
            if RELU2:
                acc = tl.maximum(acc, 0.0)
            _store_final(
                acc,
                offs_out,
                y,
                x,
                ok,
                out_ptr,
                scale_ptr,
                out_offset,
                out_pixel_stride,
                out_row_stride,
                keep_y,
                keep_x,
                keep_h,
                keep_w,
                dst_y,
                dst_x,
                OUTPUT_PASS,
                TRANSFER,
                HDR,
                SNORM,
                OUT_CHANNELS,
            )
        tl.debug_barrier()


@_jit("height", "width")
def conv_project_kernel(
    src_ptr,
    w_ptr,
    bias_ptr,
    proj_ptr,
    out_ptr,
    height,
    width,
    channels,
    w_stride,
    w_cols,
    RELU: tl.constexpr,
    MID: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    TAPS: tl.constexpr,
):
    """The hidden conv with the final conv's matrix product in its epilogue.

    ``z[p, fusion.z_column(t, o)] = sum_c hidden[p, c] * W_final[o, c, t]`` for the 9
    taps ``t`` (``proj_ptr``: ``[MID, 32]``, `fusion.project_weights`), stored as ``[H, W, 32]``
    fp16/bf16 in place of the hidden value: the final conv is then a sum of 9 shifted
    3-channel slices (`tap_sum_kernel`), not a 9-tap GEMM over ``MID`` channels.
    """
    pixel = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    y = pixel // width
    x = pixel - y * width
    m_ok = pixel < height * width
    offs_mid = tl.arange(0, MID)
    acc = tl.zeros((BLOCK_M, MID), dtype=tl.float32)
    acc = _accumulate(
        acc,
        src_ptr,
        w_ptr,
        0,
        y,
        x,
        m_ok,
        height,
        width,
        channels,
        w_stride,
        w_cols,
        offs_mid,
        False,
        BLOCK_K,
        TAPS,
    )
    acc = acc + tl.load(bias_ptr + offs_mid)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    offs_z = tl.arange(0, 32)
    proj = tl.load(proj_ptr + offs_mid[:, None] * 32 + offs_z[None, :])
    z = tl.dot(acc.to(proj_ptr.dtype.element_ty), proj)
    ptrs = out_ptr + pixel[:, None] * 32 + offs_z[None, :]
    tl.store(ptrs, z.to(out_ptr.dtype.element_ty), mask=m_ok[:, None])


@_jit(
    "height",
    "width",
    "out_offset",
    "out_pixel_stride",
    "out_row_stride",
    "keep_y",
    "keep_x",
    "keep_h",
    "keep_w",
    "dst_y",
    "dst_x",
)
def tap_sum_kernel(
    z_ptr,
    bias_ptr,
    out_ptr,
    height,
    width,
    scale_ptr,
    out_offset,
    out_pixel_stride,
    out_row_stride,
    keep_y,
    keep_x,
    keep_h,
    keep_w,
    dst_y,
    dst_x,
    RELU: tl.constexpr,
    OUTPUT_PASS: tl.constexpr,
    TRANSFER: tl.constexpr,
    HDR: tl.constexpr,
    SNORM: tl.constexpr,
    OUT_CHANNELS: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_W: tl.constexpr,
):
    """The final conv from `conv_project_kernel`'s ``z``: ``out[p, o] = bias[o] + sum_t
    z[p + offset(t), fusion.z_column(t, o)]`` (zero outside the image, taps in order),
    then the output pass. Taps 0-7 are one aligned 4-wide load each (the fourth lane,
    tap 8's, lands in the accumulator's unused fourth channel), tap 8 a strided one."""
    offs = tl.arange(0, BLOCK_H * BLOCK_W)
    y = tl.program_id(1) * BLOCK_H + offs // BLOCK_W
    x = tl.program_id(0) * BLOCK_W + offs % BLOCK_W
    m_ok = (y < height) & (x < width)
    offs_n = tl.arange(0, 4)
    acc = tl.zeros((BLOCK_H * BLOCK_W, 4), dtype=tl.float32)
    for tap in tl.static_range(9):
        yy = y + (tap // 3 - 1)
        xx = x + (tap % 3 - 1)
        ok = m_ok & (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
        if tap < 8:
            columns = 4 * tap + offs_n
            mask = ok[:, None] & (offs_n < 4)[None, :]
        else:
            columns = 4 * offs_n + 3
            mask = ok[:, None] & (offs_n < 3)[None, :]
        ptrs = z_ptr + (yy * width + xx)[:, None] * 32 + columns[None, :]
        acc += tl.load(ptrs, mask=mask, other=0.0).to(tl.float32)
    acc = acc + tl.load(bias_ptr + offs_n)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)
    _store_final(
        acc,
        offs_n,
        y,
        x,
        m_ok,
        out_ptr,
        scale_ptr,
        out_offset,
        out_pixel_stride,
        out_row_stride,
        keep_y,
        keep_x,
        keep_h,
        keep_w,
        dst_y,
        dst_x,
        OUTPUT_PASS,
        TRANSFER,
        HDR,
        SNORM,
        OUT_CHANNELS,
    )
