# ruff: noqa: N803, SIM108 - Triton names constexpr parameters in capitals; branches on constexprs
"""Triton kernels of the CUDA backend: the implicit-GEMM 3x3 conv and the shared helpers.

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

The input pass and autoexposure kernels, which build on the helpers and constants here,
are `io_kernels`'.

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
