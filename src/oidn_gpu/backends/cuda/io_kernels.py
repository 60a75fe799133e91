# ruff: noqa: N803, SIM108 - Triton names constexpr parameters in capitals; branches on constexprs
"""Triton kernels of the CUDA backend's input pass and autoexposure (the helpers and OIDN's
constants are `triton_kernels`').

**Input pass** (`input_pass_kernel`): reads the tile's rectangle of up to three
float32 images (any strides, 1-3 channels broadcast as OIDN does), scales the
main image by the device scalar, sanitizes, transfer-encodes (main) or clamps
(albedo, normal) and writes the padded NHWC network input; everything outside
the rectangle is zero (OIDN's padding).

**Autoexposure** (`autoexposure_bins_kernel`): one program per bin of at most
16 x 16 pixels (OIDN's bin bounds ``floor(i * H / nbins)``), the bin's average
luminance of the sanitized colour; then `autoexposure_scale_kernel`, one program:
``key / 2^mean(log2)`` over the bins.
"""

from oidn_gpu.backends.cuda.triton_kernels import (
    FLT_MAX,
    LUM_B,
    LUM_G,
    LUM_R,
    _forward_transfer,
    _jit,
    tl,
    triton,
)


@triton.jit
def _load_rgb(ptr, offset, pixel_stride, row_stride, channels, iy, ix, ok):
    base = offset + iy * row_stride + ix * pixel_stride
    c1 = tl.minimum(channels - 1, 1)
    c2 = tl.minimum(channels - 1, 2)
    r = tl.load(ptr + base, mask=ok, other=0.0).to(tl.float32)
    g = tl.load(ptr + base + c1, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(ptr + base + c2, mask=ok, other=0.0).to(tl.float32)
    return r, g, b


@triton.jit
def _main_value(v, scale, TRANSFER: tl.constexpr, HDR: tl.constexpr, SNORM: tl.constexpr):
    v = v * scale
    v = tl.where(v != v, 0.0, v)
    if SNORM:
        lo = -1.0
    else:
        lo = 0.0
    if HDR:
        hi = FLT_MAX
    else:
        hi = 1.0
    v = tl.minimum(tl.maximum(v, lo), hi)
    if SNORM:
        v = v * 0.5 + 0.5
    return _forward_transfer(v, TRANSFER)


@triton.jit
def _aux_value(v, NORMAL: tl.constexpr):
    v = tl.where(v != v, 0.0, v)
    if NORMAL:
        v = tl.minimum(tl.maximum(v, -1.0), 1.0) * 0.5 + 0.5
    else:
        v = tl.minimum(tl.maximum(v, 0.0), 1.0)
    return v


@triton.jit
def _put(tile, cols, index: tl.constexpr, value):
    return tl.where(cols[None, :] == index, value[:, None], tile)


@triton.jit
def _channels16(v0, v1, v2, v3, v4, v5, v6, v7, v8, zero):
    """``[BLOCK, 16]`` whose column ``k`` is ``v_k`` (``zero`` past 8): joins and
    interleaves, each column ``k`` built from the pair ``(k, k + 8)``, then ``(k, k + 4)``,
    ``(k, k + 2)``, ``(k, k + 1)``: data movement only, no per-column selects."""
    l0 = tl.join(v0, v8)
    l1 = tl.join(v1, zero)
    l2 = tl.join(v2, zero)
    l3 = tl.join(v3, zero)
    l4 = tl.join(v4, zero)
    l5 = tl.join(v5, zero)
    l6 = tl.join(v6, zero)
    l7 = tl.join(v7, zero)
    m0 = tl.interleave(l0, l4)
    m1 = tl.interleave(l1, l5)
    m2 = tl.interleave(l2, l6)
    m3 = tl.interleave(l3, l7)
    return tl.interleave(tl.interleave(m0, m2), tl.interleave(m1, m3))


@_jit(
    "main_offset",
    "main_pixel_stride",
    "main_row_stride",
    "alb_offset",
    "alb_pixel_stride",
    "alb_row_stride",
    "nrm_offset",
    "nrm_pixel_stride",
    "nrm_row_stride",
    "height",
    "width",
    "in_y",
    "in_x",
    "in_h",
    "in_w",
    "buf_y",
    "buf_x",
)
def input_pass_kernel(
    main_ptr,
    main_offset,
    main_pixel_stride,
    main_row_stride,
    main_channels,
    alb_ptr,
    alb_offset,
    alb_pixel_stride,
    alb_row_stride,
    alb_channels,
    nrm_ptr,
    nrm_offset,
    nrm_pixel_stride,
    nrm_row_stride,
    nrm_channels,
    scale_ptr,
    out_ptr,
    height,
    width,
    out_channels,
    in_y,
    in_x,
    in_h,
    in_w,
    buf_y,
    buf_x,
    IMAGES: tl.constexpr,
    TRANSFER: tl.constexpr,
    HDR: tl.constexpr,
    SNORM: tl.constexpr,
    BLOCK: tl.constexpr,
    CHANNELS: tl.constexpr,
    JOIN: tl.constexpr = True,
):
    """The network input of one tile: ``BLOCK`` pixels of the ``[height, width, CHANNELS]``
    buffer per program, the images' rectangle at ``(buf_y, buf_x)`` (zero elsewhere). With
    ``CHANNELS`` 16 the channels are joined into each pixel's row (`_channels16`; an H200
    took 17.3 us at 1280x720 against 20.1 us for a select per channel, JOIN False, which
    moves every channel through shared memory: the same bits, docs/benchmarks.md)."""
    pixel = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m_ok = pixel < height * width
    y = pixel // width
    x = pixel - y * width
    iy = y - buf_y
    ix = x - buf_x
    ok = m_ok & (iy >= 0) & (iy < in_h) & (ix >= 0) & (ix < in_w)
    iy = iy + in_y
    ix = ix + in_x
    cols = tl.arange(0, CHANNELS)
    scale = tl.load(scale_ptr)
    zero = tl.zeros((BLOCK,), dtype=tl.float32)
    r, g, b = _load_rgb(
        main_ptr, main_offset, main_pixel_stride, main_row_stride, main_channels, iy, ix, ok
    )
    v0 = _main_value(r, scale, TRANSFER, HDR, SNORM)
    v1 = _main_value(g, scale, TRANSFER, HDR, SNORM)
    v2 = _main_value(b, scale, TRANSFER, HDR, SNORM)
    v3, v4, v5, v6, v7, v8 = zero, zero, zero, zero, zero, zero
    if IMAGES > 1:
        r, g, b = _load_rgb(
            alb_ptr, alb_offset, alb_pixel_stride, alb_row_stride, alb_channels, iy, ix, ok
        )
        v3, v4, v5 = _aux_value(r, False), _aux_value(g, False), _aux_value(b, False)
    if IMAGES > 2:
        r, g, b = _load_rgb(
            nrm_ptr, nrm_offset, nrm_pixel_stride, nrm_row_stride, nrm_channels, iy, ix, ok
        )
        v6, v7, v8 = _aux_value(r, True), _aux_value(g, True), _aux_value(b, True)
    if CHANNELS == 16 and JOIN:
        tile = _channels16(v0, v1, v2, v3, v4, v5, v6, v7, v8, zero)
    else:
        tile = tl.zeros((BLOCK, CHANNELS), dtype=tl.float32)
        tile = _put(tile, cols, 0, v0)
        tile = _put(tile, cols, 1, v1)
        tile = _put(tile, cols, 2, v2)
        if IMAGES > 1:
            tile = _put(tile, cols, 3, v3)
            tile = _put(tile, cols, 4, v4)
            tile = _put(tile, cols, 5, v5)
        if IMAGES > 2:
            tile = _put(tile, cols, 6, v6)
            tile = _put(tile, cols, 7, v7)
            tile = _put(tile, cols, 8, v8)
    # outside the image rectangle every channel is an exact zero (OIDN's padding)
    tile = tl.where(ok[:, None], tile, 0.0)
    ptrs = out_ptr + pixel[:, None] * out_channels + cols[None, :]
    mask = m_ok[:, None] & (cols < out_channels)[None, :]
    tl.store(ptrs, tile.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- autoexposure


@_jit("offset", "pixel_stride", "row_stride", "height", "width", "bins_h", "bins_w")
def autoexposure_bins_kernel(
    color_ptr,
    offset,
    pixel_stride,
    row_stride,
    channels,
    height,
    width,
    bins_h,
    bins_w,
    out_ptr,
    MAX_BIN: tl.constexpr,
):
    i = tl.program_id(0)
    j = tl.program_id(1)
    r0 = (i * height) // bins_h
    r1 = ((i + 1) * height) // bins_h
    c0 = (j * width) // bins_w
    c1 = ((j + 1) * width) // bins_w
    rows = r0 + tl.arange(0, MAX_BIN)
    cols = c0 + tl.arange(0, MAX_BIN)
    ok = (rows < r1)[:, None] & (cols < c1)[None, :]
    base = offset + rows[:, None] * row_stride + cols[None, :] * pixel_stride
    c1_ = tl.minimum(channels - 1, 1)
    c2_ = tl.minimum(channels - 1, 2)
    r = tl.load(color_ptr + base, mask=ok, other=0.0).to(tl.float32)
    g = tl.load(color_ptr + base + c1_, mask=ok, other=0.0).to(tl.float32)
    b = tl.load(color_ptr + base + c2_, mask=ok, other=0.0).to(tl.float32)
    r = tl.minimum(tl.maximum(tl.where(r != r, 0.0, r), 0.0), FLT_MAX)
    g = tl.minimum(tl.maximum(tl.where(g != g, 0.0, g), 0.0), FLT_MAX)
    b = tl.minimum(tl.maximum(tl.where(b != b, 0.0, b), 0.0), FLT_MAX)
    lum = LUM_R * r + LUM_G * g + LUM_B * b
    total = tl.sum(tl.sum(tl.where(ok, lum, 0.0), axis=1), axis=0)
    count = ((r1 - r0) * (c1 - c0)).to(tl.float32)
    tl.store(out_ptr + i * bins_w + j, total / count)


@_jit("count")
def autoexposure_scale_kernel(
    bins_ptr, count, scale_ptr, KEY: tl.constexpr, EPS: tl.constexpr, BLOCK: tl.constexpr
):
    """One program: ``scale = KEY / 2^mean(log2(bins > EPS))`` (1 without such bins)."""
    offs = tl.arange(0, BLOCK)
    total = tl.zeros((BLOCK,), dtype=tl.float32)
    valid = tl.zeros((BLOCK,), dtype=tl.int32)
    for start in range(0, count, BLOCK):
        v = tl.load(bins_ptr + start + offs, mask=start + offs < count, other=0.0)
        ok = v > EPS
        total += tl.where(ok, tl.log2(tl.where(ok, v, 1.0)), 0.0)
        valid += ok.to(tl.int32)
    n = tl.sum(valid, axis=0)
    mean = tl.sum(total, axis=0) / tl.maximum(n, 1).to(tl.float32)
    scale = tl.where(n > 0, KEY / tl.exp2(mean), 1.0)
    tl.store(scale_ptr, scale)
