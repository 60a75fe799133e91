# ruff: noqa: N803 - Triton names constexpr parameters in capitals
"""`image.coverage`'s fit of an alpha to its albedo in two Triton kernels (the cuda runner's
`fit_coverage`).

The torch form of the fit (`image.coverage.fit_coverage_tensor`) launches dozens of
kernels over 13 planes of the image: 2.7 ms at 1080p on an H100, more than the colour's
denoise; these two take 0.35 ms. The first computes every window's affine fit straight
from the alpha and the albedo (the 13 window means summed in registers, the 3 x 3 system
solved by its adjugate), the second averages the fits over each pixel's window and applies
them: the arithmetic of the NumPy and torch forms. Coordinates outside the image read its
nearest edge pixel (the edge extension of those forms). The kernels are not part of a
frame's recorded kernels (`kernel_specs`): Triton compiles them on a process's first
fitted alpha and keeps them in its cache.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from oidn_gpu.image.coverage import CENTRE, COVERAGE_EPS, COVERAGE_RADIUS

# Pixels of one program and its warps: the fastest of 15 shapes and 2, 4 or 8 warps on an
# H100 at 1080p (0.35 ms for both kernels; 8 x 64 with 4 warps 0.60 ms; docs/benchmarks.md).
BLOCK_H, BLOCK_W, WARPS = 4, 128, 8


# Sizes and strides are runtime arguments: a new image size compiles nothing.
@triton.jit(do_not_specialize=["height", "width", "s_ah", "s_aw", "s_gh", "s_gw", "s_gc"])
def _fit_windows(
    alpha_ptr,
    guide_ptr,
    ab_ptr,
    height,
    width,
    s_ah,
    s_aw,
    s_gh,
    s_gw,
    s_gc,
    eps,
    centre,
    RADIUS: tl.constexpr,
    BH: tl.constexpr,
    BW: tl.constexpr,
):
    """The fit ``(a0, a1, a2, b)`` of every window centred on the image extended by
    ``RADIUS`` (``4 x (H + 2R) x (W + 2R)`` float32 at ``ab_ptr``)."""
    ext_h = height + 2 * RADIUS
    ext_w = width + 2 * RADIUS
    ys = tl.program_id(0) * BH + tl.arange(0, BH)[:, None]
    xs = tl.program_id(1) * BW + tl.arange(0, BW)[None, :]
    zero = tl.zeros((BH, BW), tl.float32)
    # window sums: the guide, the alpha, guide x alpha, guide x guide (`_PAIRS`)
    g0, g1, g2, p = zero, zero, zero, zero
    gp0, gp1, gp2 = zero, zero, zero
    s00, s01, s02, s11, s12, s22 = zero, zero, zero, zero, zero, zero
    for dy in tl.static_range(2 * RADIUS + 1):
        iy = tl.minimum(tl.maximum(ys + dy - 2 * RADIUS, 0), height - 1)
        for dx in tl.static_range(2 * RADIUS + 1):
            ix = tl.minimum(tl.maximum(xs + dx - 2 * RADIUS, 0), width - 1)
            va = tl.load(alpha_ptr + iy * s_ah + ix * s_aw).to(tl.float32) - centre
            at = guide_ptr + iy * s_gh + ix * s_gw
            v0 = tl.load(at).to(tl.float32) - centre
            v1 = tl.load(at + s_gc).to(tl.float32) - centre
            v2 = tl.load(at + 2 * s_gc).to(tl.float32) - centre
            g0 += v0
            g1 += v1
            g2 += v2
            p += va
            gp0 += v0 * va
            gp1 += v1 * va
            gp2 += v2 * va
            s00 += v0 * v0
            s01 += v0 * v1
            s02 += v0 * v2
            s11 += v1 * v1
            s12 += v1 * v2
            s22 += v2 * v2
    n = 1.0 / ((2 * RADIUS + 1) * (2 * RADIUS + 1))
    g0, g1, g2, p = g0 * n, g1 * n, g2 * n, p * n
    a00 = s00 * n - g0 * g0 + eps
    a01 = s01 * n - g0 * g1
    a02 = s02 * n - g0 * g2
    a11 = s11 * n - g1 * g1 + eps
    a12 = s12 * n - g1 * g2
    a22 = s22 * n - g2 * g2 + eps
    c0 = gp0 * n - g0 * p
    c1 = gp1 * n - g1 * p
    c2 = gp2 * n - g2 * p
    i00 = a11 * a22 - a12 * a12
    i01 = a02 * a12 - a01 * a22
    i02 = a01 * a12 - a02 * a11
    i11 = a00 * a22 - a02 * a02
    i12 = a01 * a02 - a00 * a12
    i22 = a00 * a11 - a01 * a01
    det = a00 * i00 + a01 * i01 + a02 * i02
    x0 = (i00 * c0 + i01 * c1 + i02 * c2) / det
    x1 = (i01 * c0 + i11 * c1 + i12 * c2) / det
    x2 = (i02 * c0 + i12 * c1 + i22 * c2) / det
    b = p - x0 * g0 - x1 * g1 - x2 * g2
    inside = (ys < ext_h) & (xs < ext_w)
    plane = ext_h * ext_w
    at = ab_ptr + ys * ext_w + xs
    tl.store(at, x0, mask=inside)
    tl.store(at + plane, x1, mask=inside)
    tl.store(at + 2 * plane, x2, mask=inside)
    tl.store(at + 3 * plane, b, mask=inside)


@triton.jit(do_not_specialize=["height", "width", "s_gh", "s_gw", "s_gc"])
def _apply_fits(
    ab_ptr,
    guide_ptr,
    out_ptr,
    height,
    width,
    s_gh,
    s_gw,
    s_gc,
    centre,
    RADIUS: tl.constexpr,
    BH: tl.constexpr,
    BW: tl.constexpr,
):
    """The fitted alpha (``H x W`` float32 at ``out_ptr``): the fits of the windows that
    hold a pixel averaged, applied to its guide."""
    ext_w = width + 2 * RADIUS
    plane = (height + 2 * RADIUS) * ext_w
    ys = tl.program_id(0) * BH + tl.arange(0, BH)[:, None]
    xs = tl.program_id(1) * BW + tl.arange(0, BW)[None, :]
    inside = (ys < height) & (xs < width)
    zero = tl.zeros((BH, BW), tl.float32)
    m0, m1, m2, mb = zero, zero, zero, zero
    for dy in tl.static_range(2 * RADIUS + 1):
        for dx in tl.static_range(2 * RADIUS + 1):
            at = ab_ptr + (ys + dy) * ext_w + (xs + dx)
            m0 += tl.load(at, mask=inside, other=0.0)
            m1 += tl.load(at + plane, mask=inside, other=0.0)
            m2 += tl.load(at + 2 * plane, mask=inside, other=0.0)
            mb += tl.load(at + 3 * plane, mask=inside, other=0.0)
    n = 1.0 / ((2 * RADIUS + 1) * (2 * RADIUS + 1))
    at = guide_ptr + ys * s_gh + xs * s_gw
    v0 = tl.load(at, mask=inside, other=0.0).to(tl.float32) - centre
    v1 = tl.load(at + s_gc, mask=inside, other=0.0).to(tl.float32) - centre
    v2 = tl.load(at + 2 * s_gc, mask=inside, other=0.0).to(tl.float32) - centre
    fitted = (m0 * n) * v0 + (m1 * n) * v1 + (m2 * n) * v2 + mb * n + centre
    tl.store(out_ptr + ys * width + xs, fitted, mask=inside)


def fit_coverage(alpha: Any, guide: Any) -> Any:
    """`image.coverage.fit_coverage_tensor` of an ``H x W`` alpha and an ``H x W x C``
    (or ``H x W``) guide on the GPU: a float32 ``H x W`` tensor. A guide of fewer than
    three channels is read as its first channel three times."""
    height, width = alpha.shape
    if guide.ndim == 2:
        guide = guide[:, :, None]
    s_gc = guide.stride(2) if guide.shape[2] >= 3 else 0
    radius = COVERAGE_RADIUS
    ab = torch.empty(
        (4, height + 2 * radius, width + 2 * radius), dtype=torch.float32, device=alpha.device
    )
    out = torch.empty((height, width), dtype=torch.float32, device=alpha.device)
    grid = (triton.cdiv(height + 2 * radius, BLOCK_H), triton.cdiv(width + 2 * radius, BLOCK_W))
    _fit_windows[grid](
        alpha,
        guide,
        ab,
        height,
        width,
        alpha.stride(0),
        alpha.stride(1),
        guide.stride(0),
        guide.stride(1),
        s_gc,
        COVERAGE_EPS,
        CENTRE,
        RADIUS=radius,
        BH=BLOCK_H,
        BW=BLOCK_W,
        num_warps=WARPS,
    )
    grid = (triton.cdiv(height, BLOCK_H), triton.cdiv(width, BLOCK_W))
    _apply_fits[grid](
        ab,
        guide,
        out,
        height,
        width,
        guide.stride(0),
        guide.stride(1),
        s_gc,
        CENTRE,
        RADIUS=radius,
        BH=BLOCK_H,
        BW=BLOCK_W,
        num_warps=WARPS,
    )
    return out
