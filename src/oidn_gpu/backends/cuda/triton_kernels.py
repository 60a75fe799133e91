# ruff: noqa: N803, SIM108 - Triton names constexpr parameters in capitals; branches on constexprs
"""Triton kernels of the CUDA backend: implicit-GEMM 3x3 conv, input pass, autoexposure bins.

**Convolution** (`conv3x3_kernel`). One program computes a ``BLOCK_M x BLOCK_N``
tile of ``out[pixel, channel]`` as an implicit GEMM over ``K = 9 taps x input
channels``: rows of A are output pixels, gathered from the NHWC source at the
tap's offset (zero outside the image, masked loads); B is the packed weight
``[9, K, N]`` (`layout.pack_weights`). The K loop is one flat ``for`` over
(tap, channel chunk) so Triton software-pipelines the loads across taps
(``num_stages``); fp16/bf16 operands, fp32 accumulation (``tl.dot``).

- A decoder conv reads two sources in one accumulator: the first usually at
  half resolution (nearest upsample: pixel ``(y // 2, x // 2)``), then the skip;
  neither the upsampled nor the concatenated tensor exists.
- Epilogue: bias, ReLU; with ``POOL`` the M index enumerates 2x2 quads
  (``m = 4 * pooled_pixel + sub``) and the tile is max-reduced over groups of 4
  rows before the store, so only the pooled tensor is written.
- ``FINAL``: the graph output. The 3 channels go through OIDN's output pass
  (`image.process.finish_output`: NaN -> 0, clamp, inverse transfer, 1-channel
  average, snorm, LDR clamp, output scale from the device scalar) and are stored
  as float32 into an image with arbitrary pixel and row strides, restricted to
  the tile's kept rectangle; with ``OUTPUT_PASS=False`` the raw network output is
  stored (the executor's ``[H, W, 3]`` result).

**Input pass** (`input_pass_kernel`): reads the tile's rectangle of up to three
float32 images (any strides, 1-3 channels broadcast as OIDN does), scales the
main image by the device scalar, sanitizes, transfer-encodes (main) or clamps
(albedo, normal) and writes the padded NHWC network input; everything outside
the rectangle is zero (OIDN's padding).

**Autoexposure** (`autoexposure_bins_kernel`): one program per bin of at most
16 x 16 pixels (OIDN's bin bounds ``floor(i * H / nbins)``), the bin's average
luminance of the sanitized colour; the geometric mean over the bins and the
scale are torch reductions on the device (`pipeline`).

Transfer constants come from `image.transfer`; ``pow``, ``log`` and ``exp`` are
computed with ``exp2``/``log2``.
"""

import math
from types import SimpleNamespace

from oidn_gpu.image import transfer as tf

try:
    import triton
    import triton.language as tl

    UNAVAILABLE: str | None = None
except Exception as exc:
    UNAVAILABLE = f"triton is not importable ({type(exc).__name__}: {exc})"
    # Stand-ins so this module imports; its kernels are never launched then.
    triton = SimpleNamespace(
        jit=lambda fn=None, **_: fn if fn is not None else (lambda f: f),
        cdiv=lambda a, b: -(-a // b),
    )
    tl = SimpleNamespace(constexpr=lambda value: value)


def _jit(*sizes: str):
    """``triton.jit`` that compiles one kernel for every value of the ``sizes`` arguments.

    Triton specializes integer arguments on ``== 1`` and divisibility by 16 by default,
    so each new image size (or offset, or row stride) would compile the kernel again;
    image sizes, offsets and strides are runtime values here, channel counts (fixed per
    layer) stay specialized.
    """
    return triton.jit(do_not_specialize=list(sizes))


# Transfer ids (constexpr) shared with the Python side.
LINEAR, SRGB, PU, LOG = 0, 1, 2, 3

_LOG2E = 1.0 / math.log(2.0)
_LN2 = math.log(2.0)
_FLT_MAX = 3.4028234663852886e38

# Python floats of OIDN's float32 constants (exact values), captured as globals by the kernels.
PU_A = tl.constexpr(float(tf.PU_A))
PU_B = tl.constexpr(float(tf.PU_B))
PU_C = tl.constexpr(float(tf.PU_C))
PU_D = tl.constexpr(float(tf.PU_D))
PU_E = tl.constexpr(float(tf.PU_E))
PU_F = tl.constexpr(float(tf.PU_F))
PU_G = tl.constexpr(float(tf.PU_G))
PU_Y0 = tl.constexpr(float(tf.PU_Y0))
PU_Y1 = tl.constexpr(float(tf.PU_Y1))
PU_X0 = tl.constexpr(float(tf.PU_X0))
PU_X1 = tl.constexpr(float(tf.PU_X1))
PU_INV_C = tl.constexpr(float(tf.PU_INV_C))
PU_NORM_SCALE = tl.constexpr(float(tf.PU_NORM_SCALE))
PU_RCP_NORM_SCALE = tl.constexpr(float(tf.PU_RCP_NORM_SCALE))
SRGB_A = tl.constexpr(float(tf.SRGB_A))
SRGB_B = tl.constexpr(float(tf.SRGB_B))
SRGB_C = tl.constexpr(float(tf.SRGB_C))
SRGB_Y0 = tl.constexpr(float(tf.SRGB_Y0))
SRGB_X0 = tl.constexpr(float(tf.SRGB_X0))
SRGB_EXPONENT = tl.constexpr(float(tf.SRGB_EXPONENT))
SRGB_INV_EXPONENT = tl.constexpr(float(tf.SRGB_INV_EXPONENT))
LOG_NORM_SCALE = tl.constexpr(float(tf.LOG_NORM_SCALE))
LOG_RCP_NORM_SCALE = tl.constexpr(float(tf.LOG_RCP_NORM_SCALE))
LOG2E = tl.constexpr(_LOG2E)
FLT_MAX = tl.constexpr(_FLT_MAX)
ONE_THIRD = tl.constexpr(float(1.0 / 3.0))
# Luminance weights, OIDN core/color.h luminance().
LUM_R = tl.constexpr(0.212671)
LUM_G = tl.constexpr(0.715160)
LUM_B = tl.constexpr(0.072169)


# ----------------------------------------------------------------------------- convolution


@triton.jit
def _accumulate(
    acc,
    src_ptr,
    w_ptr,
    w_base,
    y,
    x,
    m_ok,
    height,
    width,
    channels,
    w_stride,
    w_cols,
    offs_n,
    UPSAMPLE: tl.constexpr,
    BLOCK_K: tl.constexpr,
    TAPS: tl.constexpr,
):
    """``acc += A(src) @ W`` over the 9 taps and all channel chunks of one source.

    ``TAPS == 1``: each K step is one tap's chunk of ``BLOCK_K`` channels. ``TAPS > 1``
    (sources of 16, 32 or 64 stored channels): each K step covers ``TAPS`` consecutive taps
    of all ``BLOCK_K // TAPS`` channels, so short K loops become fewer, larger dots.
    """
    offs_k = tl.arange(0, BLOCK_K)
    if UPSAMPLE:
        src_width = width // 2
    else:
        src_width = width
    if TAPS > 1:
        sub = offs_k // (BLOCK_K // TAPS)
        cols = offs_k % (BLOCK_K // TAPS)
        for i in range(0, (9 + TAPS - 1) // TAPS):
            tap = i * TAPS + sub
            tap_ok = tap < 9
            yy = y[:, None] + (tap // 3 - 1)[None, :]
            xx = x[:, None] + (tap % 3 - 1)[None, :]
            ok = m_ok[:, None] & tap_ok[None, :] & (yy >= 0) & (yy < height)
            ok = ok & (xx >= 0) & (xx < width)
            if UPSAMPLE:
                pixel = (tl.maximum(yy, 0) // 2) * src_width + tl.maximum(xx, 0) // 2
            else:
                pixel = yy * src_width + xx
            a = tl.load(src_ptr + pixel * channels + cols[None, :], mask=ok, other=0.0)
            rows = w_base + tl.minimum(tap, 8) * w_stride + cols
            b = tl.load(
                w_ptr + rows[:, None] * w_cols + offs_n[None, :],
                mask=tap_ok[:, None],
                other=0.0,
            )
            acc = tl.dot(a, b, acc)
    else:
        chunks = tl.cdiv(channels, BLOCK_K)
        for i in range(0, 9 * chunks):
            tap = i // chunks
            c0 = (i - tap * chunks) * BLOCK_K
            yy = y + (tap // 3 - 1)
            xx = x + (tap % 3 - 1)
            ok = m_ok & (yy >= 0) & (yy < height) & (xx >= 0) & (xx < width)
            if UPSAMPLE:
                pixel = (tl.maximum(yy, 0) // 2) * src_width + tl.maximum(xx, 0) // 2
            else:
                pixel = yy * src_width + xx
            cols = c0 + offs_k
            a = tl.load(
                src_ptr + pixel[:, None] * channels + cols[None, :],
                mask=ok[:, None] & (cols < channels)[None, :],
                other=0.0,
            )
            rows = w_base + tap * w_stride + cols
            b = tl.load(w_ptr + rows[:, None] * w_cols + offs_n[None, :])
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _accumulate_parity(
    acc,
    src_ptr,
    w_ptr,
    w_base,
    qi,
    qj,
    m_ok,
    half_h,
    half_w,
    channels,
    w_stride,
    w_cols,
    offs_n,
    py,
    px,
    BLOCK_K: tl.constexpr,
):
    """``acc += A @ W`` for an upsampled source, all outputs of one parity ``(py, px)``.

    Output ``(2i + py, 2j + px)`` of a 3x3 conv over the nearest-upsampled source reads
    only source rows ``i + py - 1 + ty`` and columns ``j + px - 1 + tx`` (``ty, tx`` in
    0, 1): a 2x2 conv with the 3x3 taps that land on the same source pixel summed
    (`layout.pack_weights`), 4 taps instead of 9.
    """
    offs_k = tl.arange(0, BLOCK_K)
    chunks = tl.cdiv(channels, BLOCK_K)
    for i in range(0, 4 * chunks):
        t = i // chunks
        c0 = (i - t * chunks) * BLOCK_K
        sy = qi + py - 1 + t // 2
        sx = qj + px - 1 + t % 2
        ok = m_ok & (sy >= 0) & (sy < half_h) & (sx >= 0) & (sx < half_w)
        pixel = sy * half_w + sx
        cols = c0 + offs_k
        a = tl.load(
            src_ptr + pixel[:, None] * channels + cols[None, :],
            mask=ok[:, None] & (cols < channels)[None, :],
            other=0.0,
        )
        rows = w_base + t * w_stride + cols
        b = tl.load(w_ptr + rows[:, None] * w_cols + offs_n[None, :])
        acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def _inverse_transfer(v, TRANSFER: tl.constexpr):
    if TRANSFER == 2:  # PU
        x = v * PU_RCP_NORM_SCALE
        linear = x / PU_A
        power = tl.exp2(tl.log2(tl.maximum((x - PU_D) / PU_B, 1e-30)) * PU_INV_C)
        logarithmic = tl.exp2(((x - PU_G) / PU_E) * LOG2E) - PU_F
        v = tl.where(x <= PU_X0, linear, tl.where(x <= PU_X1, power, logarithmic))
    elif TRANSFER == 1:  # sRGB
        curve = tl.exp2(tl.log2(tl.maximum((v + SRGB_C) / SRGB_B, 1e-30)) * SRGB_INV_EXPONENT)
        v = tl.where(v <= SRGB_X0, v / SRGB_A, curve)
    elif TRANSFER == 3:  # Log
        v = tl.exp2(v * LOG_RCP_NORM_SCALE * LOG2E) - 1.0
    return v


@triton.jit
def _forward_transfer(v, TRANSFER: tl.constexpr):
    if TRANSFER == 2:  # PU
        linear = v * PU_A
        power = PU_B * tl.exp2(tl.log2(tl.maximum(v, 1e-30)) * PU_C) + PU_D
        logarithmic = PU_E * (tl.log2(v + PU_F) / LOG2E) + PU_G
        v = tl.where(v <= PU_Y0, linear, tl.where(v <= PU_Y1, power, logarithmic))
        v = v * PU_NORM_SCALE
    elif TRANSFER == 1:  # sRGB
        curve = SRGB_B * tl.exp2(tl.log2(tl.maximum(v, 1e-30)) * SRGB_EXPONENT) - SRGB_C
        v = tl.where(v <= SRGB_Y0, v * SRGB_A, curve)
    elif TRANSFER == 3:  # Log
        v = (tl.log2(v + 1.0) / LOG2E) * LOG_NORM_SCALE
    return v


@triton.jit
def _finish(v, out_scale, TRANSFER: tl.constexpr, HDR: tl.constexpr, SNORM: tl.constexpr):
    if SNORM:
        v = tl.maximum(v * 2.0 - 1.0, -1.0)
    if not HDR:
        v = tl.minimum(v, 1.0)
    return v * out_scale


@triton.jit
def _sanitize_output(v, TRANSFER: tl.constexpr):
    v = tl.where(v != v, 0.0, v)
    v = tl.minimum(tl.maximum(v, 0.0), FLT_MAX)
    return _inverse_transfer(v, TRANSFER)


@triton.jit
def _store_final(
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
    OUTPUT_PASS: tl.constexpr,
    TRANSFER: tl.constexpr,
    HDR: tl.constexpr,
    SNORM: tl.constexpr,
    OUT_CHANNELS: tl.constexpr,
):
    """Store the 3 output channels of ``acc`` (pixels ``(y, x)``) as float32 into the
    image, restricted to the kept rectangle, through the output pass if asked."""
    r = tl.sum(tl.where(offs_n[None, :] == 0, acc, 0.0), axis=1)
    g = tl.sum(tl.where(offs_n[None, :] == 1, acc, 0.0), axis=1)
    b = tl.sum(tl.where(offs_n[None, :] == 2, acc, 0.0), axis=1)
    ky = y - keep_y
    kx = x - keep_x
    keep = m_ok & (ky >= 0) & (ky < keep_h) & (kx >= 0) & (kx < keep_w)
    base = out_offset + (dst_y + ky) * out_row_stride + (dst_x + kx) * out_pixel_stride
    if OUTPUT_PASS:
        scale = tl.load(scale_ptr)
        out_scale = tl.where(scale == 0.0, 0.0, 1.0 / scale)
        r = _sanitize_output(r, TRANSFER)
        g = _sanitize_output(g, TRANSFER)
        b = _sanitize_output(b, TRANSFER)
        if OUT_CHANNELS == 1:
            r = ((r + g) + b) * ONE_THIRD
        r = _finish(r, out_scale, TRANSFER, HDR, SNORM)
        g = _finish(g, out_scale, TRANSFER, HDR, SNORM)
        b = _finish(b, out_scale, TRANSFER, HDR, SNORM)
    tl.store(out_ptr + base, r, mask=keep)
    if OUT_CHANNELS > 1:
        tl.store(out_ptr + base + 1, g, mask=keep)
    if OUT_CHANNELS > 2:
        tl.store(out_ptr + base + 2, b, mask=keep)


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
def conv3x3_kernel(
    a_ptr,
    b_ptr,
    w_ptr,
    bias_ptr,
    out_ptr,
    height,
    width,
    channels_a,
    channels_b,
    w_stride_a,
    w_base_b,
    w_stride_b,
    w_cols,
    out_channels,
    # final layer: output image and tile geometry
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
    HAS_B: tl.constexpr,
    PARITY: tl.constexpr,
    UP_A: tl.constexpr,
    UP_B: tl.constexpr,
    RELU: tl.constexpr,
    POOL: tl.constexpr,
    FINAL: tl.constexpr,
    OUTPUT_PASS: tl.constexpr,
    TRANSFER: tl.constexpr,
    HDR: tl.constexpr,
    SNORM: tl.constexpr,
    OUT_CHANNELS: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K_A: tl.constexpr,
    BLOCK_K_B: tl.constexpr,
    TAPS_A: tl.constexpr,
    TAPS_B: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if PARITY:
        # one output parity per program row of the grid: source A read as a 2x2 conv
        parity = tl.program_id(2)
        py = parity // 2
        px = parity % 2
        half_w = width // 2
        q = pid_m * BLOCK_M + offs_m
        qi = q // half_w
        qj = q - qi * half_w
        y = 2 * qi + py
        x = 2 * qj + px
        m_ok = q < (height // 2) * half_w
    elif POOL:
        half_w = width // 2
        quad = pid_m * (BLOCK_M // 4) + offs_m // 4
        sub = offs_m % 4
        qy = quad // half_w
        y = 2 * qy + sub // 2
        x = 2 * (quad - qy * half_w) + sub % 2
        m_ok = quad < (height // 2) * half_w
    else:
        pixel = pid_m * BLOCK_M + offs_m
        y = pixel // width
        x = pixel - y * width
        m_ok = pixel < height * width

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if PARITY:
        acc = _accumulate_parity(
            acc,
            a_ptr,
            w_ptr,
            parity * 4 * w_stride_a,
            qi,
            qj,
            m_ok,
            height // 2,
            width // 2,
            channels_a,
            w_stride_a,
            w_cols,
            offs_n,
            py,
            px,
            BLOCK_K_A,
        )
    else:
        acc = _accumulate(
            acc,
            a_ptr,
            w_ptr,
            0,
            y,
            x,
            m_ok,
            height,
            width,
            channels_a,
            w_stride_a,
            w_cols,
            offs_n,
            UP_A,
            BLOCK_K_A,
            TAPS_A,
        )
    if HAS_B:
        acc = _accumulate(
            acc,
            b_ptr,
            w_ptr,
            w_base_b,
            y,
            x,
            m_ok,
            height,
            width,
            channels_b,
            w_stride_b,
            w_cols,
            offs_n,
            UP_B,
            BLOCK_K_B,
            TAPS_B,
        )

    acc = acc + tl.load(bias_ptr + offs_n)[None, :]
    if RELU:
        acc = tl.maximum(acc, 0.0)

    if FINAL:
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
    elif POOL:
        pooled = tl.max(tl.reshape(acc, (BLOCK_M // 4, 4, BLOCK_N)), axis=1)
        offs_q = pid_m * (BLOCK_M // 4) + tl.arange(0, BLOCK_M // 4)
        q_ok = offs_q < (height // 2) * (width // 2)
        ptrs = out_ptr + offs_q[:, None] * out_channels + offs_n[None, :]
        mask = q_ok[:, None] & (offs_n < out_channels)[None, :]
        tl.store(ptrs, pooled.to(out_ptr.dtype.element_ty), mask=mask)
    else:
        pixel = y * width + x
        ptrs = out_ptr + pixel[:, None] * out_channels + offs_n[None, :]
        mask = m_ok[:, None] & (offs_n < out_channels)[None, :]
        tl.store(ptrs, acc.to(out_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- input pass


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
