# ruff: noqa: N803 - Triton names constexpr parameters in capitals
"""`image.coverage`'s fit of an alpha to its albedo in two Triton kernels (the cuda runner's
`fit_coverage`).

The torch form of the fit (`image.coverage.fit_coverage_tensor`) launches dozens of
kernels over 13 planes of the image: 2.7 ms at 1080p on an H100, more than the colour's
denoise; these two take 0.17-0.19 ms there (0.36-0.38 ms summing every window whole;
docs/benchmarks.md). The first kernel computes every window's affine fit straight from
the alpha and the albedo (the 13 window means summed in registers, the 3 x 3 system
solved by its adjugate), the second averages the fits over each pixel's window and
applies them: the arithmetic of the NumPy and torch forms. Each program walks down a
strip of `ROWS` rows of `BLOCK_W` columns and keeps its windows' sums as running sums: a
row's sums are the row above's plus the row that enters the window minus the row that
leaves it, so a pixel reads two rows of ``2 * RADIUS + 1`` pixels instead of the whole
window (the running sums start afresh in every strip, so float32's rounding adds up over
at most `ROWS` steps). Coordinates outside the image read its nearest edge pixel (the
edge extension of those forms). The kernels are not part of a frame's recorded kernels
(`kernel_specs`): Triton compiles them on a process's first fitted alpha and keeps them
in its cache.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

from oidn_gpu.image.coverage import CENTRE, COVERAGE_EPS, COVERAGE_RADIUS

# Rows of a program's strip, its columns and warps: among the fastest of the shapes timed on
# an H100 at 1080p (16 x 64, 8 x 64, 8 x 128 and 16 x 128 within 0.01-0.03 ms of each other).
ROWS, BLOCK_W, WARPS = 16, 64, 2


@triton.jit
def _row_change(
    alpha_ptr,
    guide_ptr,
    enter,
    leave,
    xs,
    height,
    width,
    s_ah,
    s_aw,
    s_gh,
    s_gw,
    s_gc,
    centre,
    RADIUS: tl.constexpr,
    CLIP: tl.constexpr,
):
    """The 13 sums of `_fit_windows` over the ``2 * RADIUS + 1`` pixels of row ``enter``
    of the image extended by ``2 * RADIUS`` (columns from ``xs``), minus those of row
    ``leave`` (none for a negative ``leave``); with ``CLIP`` the alpha clipped to 0..1."""
    # the rows' tests as blocks (Triton's interpreter takes no scalar in a mask)
    leaves = xs * 0 + leave >= 0
    iy = tl.minimum(tl.maximum(enter - 2 * RADIUS, 0), height - 1)
    ly = tl.minimum(tl.maximum(leave - 2 * RADIUS, 0), height - 1)
    zero = tl.zeros(xs.shape, tl.float32)
    g0, g1, g2, p = zero, zero, zero, zero
    gp0, gp1, gp2 = zero, zero, zero
    s00, s01, s02, s11, s12, s22 = zero, zero, zero, zero, zero, zero
    for dx in tl.static_range(2 * RADIUS + 1):
        ix = tl.minimum(tl.maximum(xs + dx - 2 * RADIUS, 0), width - 1)
        va = tl.load(alpha_ptr + iy * s_ah + ix * s_aw).to(tl.float32)
        at = guide_ptr + iy * s_gh + ix * s_gw
        v0 = tl.load(at).to(tl.float32) - centre
        v1 = tl.load(at + s_gc).to(tl.float32) - centre
        v2 = tl.load(at + 2 * s_gc).to(tl.float32) - centre
        # the leaving row: centred values of 0 where none leaves
        la = tl.load(alpha_ptr + ly * s_ah + ix * s_aw, mask=leaves, other=centre)
        la = la.to(tl.float32)
        if CLIP:
            va = tl.minimum(tl.maximum(va, 0.0), 1.0)
            la = tl.minimum(tl.maximum(la, 0.0), 1.0)
        va -= centre
        la -= centre
        at = guide_ptr + ly * s_gh + ix * s_gw
        l0 = tl.load(at, mask=leaves, other=centre).to(tl.float32) - centre
        l1 = tl.load(at + s_gc, mask=leaves, other=centre).to(tl.float32) - centre
        l2 = tl.load(at + 2 * s_gc, mask=leaves, other=centre).to(tl.float32) - centre
        g0 += v0 - l0
        g1 += v1 - l1
        g2 += v2 - l2
        p += va - la
        gp0 += v0 * va - l0 * la
        gp1 += v1 * va - l1 * la
        gp2 += v2 * va - l2 * la
        s00 += v0 * v0 - l0 * l0
        s01 += v0 * v1 - l0 * l1
        s02 += v0 * v2 - l0 * l2
        s11 += v1 * v1 - l1 * l1
        s12 += v1 * v2 - l1 * l2
        s22 += v2 * v2 - l2 * l2
    return g0, g1, g2, p, gp0, gp1, gp2, s00, s01, s02, s11, s12, s22


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
    ROWS: tl.constexpr,
    BW: tl.constexpr,
    CLIP: tl.constexpr,
):
    """The fit ``(a0, a1, a2, b)`` of every window centred on the image extended by
    ``RADIUS`` (``4 x (H + 2R) x (W + 2R)`` float32 at ``ab_ptr``; with ``CLIP``, of the
    alpha clipped to 0..1)."""
    ext_h = height + 2 * RADIUS
    ext_w = width + 2 * RADIUS
    plane = ext_h * ext_w
    n = 1.0 / ((2 * RADIUS + 1) * (2 * RADIUS + 1))
    y0 = tl.program_id(0) * ROWS
    xs = tl.program_id(1) * BW + tl.arange(0, BW)
    zero = tl.zeros((BW,), tl.float32)
    # window sums: the guide, the alpha, guide x alpha, guide x guide (`_PAIRS`)
    g0, g1, g2, p = zero, zero, zero, zero
    gp0, gp1, gp2 = zero, zero, zero
    s00, s01, s02, s11, s12, s22 = zero, zero, zero, zero, zero, zero
    # Row j enters the sums and row j - 2R - 1 leaves them: from j = 2R on they are the
    # window of row j - 2R, whose fit is stored.
    for j in range(ROWS + 2 * RADIUS):
        d0, d1, d2, dp, dgp0, dgp1, dgp2, d00, d01, d02, d11, d12, d22 = _row_change(
            alpha_ptr,
            guide_ptr,
            y0 + j,
            tl.where(j > 2 * RADIUS, y0 + j - 2 * RADIUS - 1, -1),
            xs,
            height,
            width,
            s_ah,
            s_aw,
            s_gh,
            s_gw,
            s_gc,
            centre,
            RADIUS,
            CLIP,
        )
        g0 += d0
        g1 += d1
        g2 += d2
        p += dp
        gp0 += dgp0
        gp1 += dgp1
        gp2 += dgp2
        s00 += d00
        s01 += d01
        s02 += d02
        s11 += d11
        s12 += d12
        s22 += d22
        if j >= 2 * RADIUS:
            y = y0 + j - 2 * RADIUS
            m0, m1, m2, mp = g0 * n, g1 * n, g2 * n, p * n
            a00 = s00 * n - m0 * m0 + eps
            a01 = s01 * n - m0 * m1
            a02 = s02 * n - m0 * m2
            a11 = s11 * n - m1 * m1 + eps
            a12 = s12 * n - m1 * m2
            a22 = s22 * n - m2 * m2 + eps
            c0 = gp0 * n - m0 * mp
            c1 = gp1 * n - m1 * mp
            c2 = gp2 * n - m2 * mp
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
            b = mp - x0 * m0 - x1 * m1 - x2 * m2
            inside = (xs < ext_w) & (xs * 0 + y < ext_h)
            at = ab_ptr + y * ext_w + xs
            tl.store(at, x0, mask=inside)
            tl.store(at + plane, x1, mask=inside)
            tl.store(at + 2 * plane, x2, mask=inside)
            tl.store(at + 3 * plane, b, mask=inside)


@triton.jit
def _fits_change(ab_ptr, enter, leave, xs, plane, ext_h, ext_w, width, RADIUS: tl.constexpr):
    """The fits ``(a0, a1, a2, b)`` summed over ``2 * RADIUS + 1`` windows of row
    ``enter`` (from the column of ``xs``; none past the last row), minus those of row
    ``leave`` (none for a negative ``leave``)."""
    enters = (xs < width) & (xs * 0 + enter < ext_h)
    leaves = (xs < width) & (xs * 0 + leave >= 0)
    zero = tl.zeros(xs.shape, tl.float32)
    m0, m1, m2, mb = zero, zero, zero, zero
    for dx in tl.static_range(2 * RADIUS + 1):
        at = ab_ptr + enter * ext_w + (xs + dx)
        out = ab_ptr + leave * ext_w + (xs + dx)
        m0 += tl.load(at, mask=enters, other=0.0) - tl.load(out, mask=leaves, other=0.0)
        m1 += tl.load(at + plane, mask=enters, other=0.0)
        m1 -= tl.load(out + plane, mask=leaves, other=0.0)
        m2 += tl.load(at + 2 * plane, mask=enters, other=0.0)
        m2 -= tl.load(out + 2 * plane, mask=leaves, other=0.0)
        mb += tl.load(at + 3 * plane, mask=enters, other=0.0)
        mb -= tl.load(out + 3 * plane, mask=leaves, other=0.0)
    return m0, m1, m2, mb


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
    ROWS: tl.constexpr,
    BW: tl.constexpr,
    CLIP: tl.constexpr,
):
    """The fitted alpha (``H x W`` float32 at ``out_ptr``): the fits of the windows that
    hold a pixel averaged, applied to its guide (with ``CLIP``, clipped to 0..1)."""
    ext_h = height + 2 * RADIUS
    ext_w = width + 2 * RADIUS
    plane = ext_h * ext_w
    n = 1.0 / ((2 * RADIUS + 1) * (2 * RADIUS + 1))
    y0 = tl.program_id(0) * ROWS
    xs = tl.program_id(1) * BW + tl.arange(0, BW)
    zero = tl.zeros((BW,), tl.float32)
    m0, m1, m2, mb = zero, zero, zero, zero
    # as in `_fit_windows`: from j = 2R on, the sums of the windows of pixel row j - 2R
    for j in range(ROWS + 2 * RADIUS):
        d0, d1, d2, db = _fits_change(
            ab_ptr,
            y0 + j,
            tl.where(j > 2 * RADIUS, y0 + j - 2 * RADIUS - 1, -1),
            xs,
            plane,
            ext_h,
            ext_w,
            width,
            RADIUS,
        )
        m0 += d0
        m1 += d1
        m2 += d2
        mb += db
        if j >= 2 * RADIUS:
            y = y0 + j - 2 * RADIUS
            inside = (xs < width) & (xs * 0 + y < height)
            at = guide_ptr + y * s_gh + xs * s_gw
            v0 = tl.load(at, mask=inside, other=0.0).to(tl.float32) - centre
            v1 = tl.load(at + s_gc, mask=inside, other=0.0).to(tl.float32) - centre
            v2 = tl.load(at + 2 * s_gc, mask=inside, other=0.0).to(tl.float32) - centre
            fitted = (m0 * n) * v0 + (m1 * n) * v1 + (m2 * n) * v2 + mb * n + centre
            if CLIP:
                fitted = tl.minimum(tl.maximum(fitted, 0.0), 1.0)
            tl.store(out_ptr + y * width + xs, fitted, mask=inside)


def fit_coverage(alpha: Any, guide: Any, *, clip: bool = False) -> Any:
    """`image.coverage.fit_coverage_tensor` of an ``H x W`` alpha and an ``H x W x C``
    (or ``H x W``) guide on the GPU: a float32 ``H x W`` tensor. A guide of fewer than
    three channels is read as its first channel three times. ``clip``: the alpha clipped
    to 0..1 as it is read, and the result too (`alpha="denoise"`'s fit, without the two
    passes over the image that clipping them apart would take)."""
    height, width = alpha.shape
    if guide.ndim == 2:
        guide = guide[:, :, None]
    s_gc = guide.stride(2) if guide.shape[2] >= 3 else 0
    radius = COVERAGE_RADIUS
    ab = torch.empty(
        (4, height + 2 * radius, width + 2 * radius), dtype=torch.float32, device=alpha.device
    )
    out = torch.empty((height, width), dtype=torch.float32, device=alpha.device)
    grid = (triton.cdiv(height + 2 * radius, ROWS), triton.cdiv(width + 2 * radius, BLOCK_W))
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
        ROWS=ROWS,
        BW=BLOCK_W,
        CLIP=clip,
        num_warps=WARPS,
    )
    grid = (triton.cdiv(height, ROWS), triton.cdiv(width, BLOCK_W))
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
        ROWS=ROWS,
        BW=BLOCK_W,
        CLIP=clip,
        num_warps=WARPS,
    )
    return out
