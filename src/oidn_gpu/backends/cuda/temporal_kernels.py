# ruff: noqa: N803, SIM108 - Triton names constexpr parameters in capitals; branches on constexprs
"""The temporal mode's passes as five Triton kernels (`CudaTemporalSession` runs them).

The arithmetic of the NumPy oracle `oidn_gpu.temporal.passes`, in the same order, on
contiguous float32 images in its channel layouts, one program per `BLOCK` pixels:

* `pack_kernel`: color, albedo, normal and depth to the ``signal`` and ``guide``
  layouts (`passes.pack_signal`, `passes.pack_guide`).
* `gather_kernel`: pass 1a (`passes.gather`): the 4x4 taps of the previous state for
  the clamped Catmull-Rom, the four in the middle also the bilinear taps with their guide
  tests (each tap loaded once, its 16 channels as whole vectors), the accumulation; it
  also counts the pixels that kept their history (one atomic add per program), the
  camera-cut test's one number, and writes the two luminances the
  light-change test sums over its window (two contiguous planes, so that the window's
  25 taps are coalesced loads).
* `near_rows_kernel`: pass 1c's row dilation (`passes.drop_near_disocclusions`): 1 where
  a pixel of the row within ``disocclusion_margin`` has no history.
* `reject_kernel`: pass 1b (`passes.reject_changes`) and the column half of pass 1c in
  place on the reprojection (it writes only the accumulated signal and the counts; 1b puts
  the frame's own signal, 1c after it that signal with its fireflies limited), and the
  accumulated color, albedo and normal as three contiguous ``[H, W, 3]`` images for the
  denoiser.
* `stabilize_kernel`: pass 2 (`passes.stabilize`) and the next state
  (`passes.next_state`), written over the previous one.

Without ``HAS_HISTORY`` the previous state and guide are not read (the empty history).
Under ``TRITON_INTERPRET=1`` they run on CPU tensors (the tests).
"""

import numpy as np

from oidn_gpu.backends.cuda.triton_kernels import UNAVAILABLE, tl, triton
from oidn_gpu.backends.cuda.triton_loader import interpreting
from oidn_gpu.temporal import passes as tp

__all__ = ["UNAVAILABLE", "gather", "pack", "reject", "stabilize"]

# pixels per program (the interpreter's cost is per program: larger blocks there)
BLOCK = 1024 if interpreting() else 128
NUM_WARPS = 4
CLAMP_IDS = {"none": 0, "minmax": 1, "variance": 2}

MAX_SIGNAL = tl.constexpr(float(tp.MAX_SIGNAL))
MAX_LUM = tl.constexpr(float(tp.MAX_CHANGE_LUMINANCE))
FLT_MAX = tl.constexpr(3.4028234663852886e38)
LUM_R = tl.constexpr(tp.LUMINANCE[0])
LUM_G = tl.constexpr(tp.LUMINANCE[1])
LUM_B = tl.constexpr(tp.LUMINANCE[2])
MIN_TAP_WEIGHT = tl.constexpr(tp.MIN_TAP_WEIGHT)
MIN_NORMAL_LENGTH = tl.constexpr(tp.MIN_NORMAL_LENGTH)
SURFACE_DEPTH = tl.constexpr(tp.SURFACE_DEPTH)
SILHOUETTE_NORMAL_COS = tl.constexpr(tp.SILHOUETTE_NORMAL_COS)
CHANGE_RADIUS = tl.constexpr(tp.CHANGE_RADIUS)
_jit = triton.jit(do_not_specialize=["height", "width"])


@triton.jit
def _sanitize(x):
    """NaN -> 0, then clamped to +-MAX_SIGNAL (infinities too)."""
    x = tl.where(x != x, 0.0, x)
    return tl.minimum(tl.maximum(x, -MAX_SIGNAL), MAX_SIGNAL)


@triton.jit
def _col(tile, c, k: tl.constexpr):
    """Column ``k`` of a ``[BLOCK, C]`` tile (exact: the other terms are zeros)."""
    return tl.sum(tl.where(c == k, tile, 0.0), axis=1)


@triton.jit
def _lum(r, g, b):
    return (LUM_R * r + LUM_G * g) + LUM_B * b


@_jit
def pack_kernel(
    color,
    albedo,
    normal,
    depth,
    signal,
    guide,
    height,
    width,
    HAS_ALBEDO: tl.constexpr,
    HAS_NORMAL: tl.constexpr,
    HAS_DEPTH: tl.constexpr,
    BLOCK: tl.constexpr,
):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pm = p < height * width
    c = tl.arange(0, 16)[None, :]
    pc = p[:, None]
    m = pm[:, None]
    sig = tl.load(color + pc * 3 + c, mask=m & (c < 3), other=0.0)
    if HAS_ALBEDO:
        a = tl.load(albedo + pc * 3 + (c - 3), mask=m & (c >= 3) & (c < 6), other=0.0)
        sig = tl.where((c >= 3) & (c < 6), a, sig)
    if HAS_NORMAL:
        n = tl.load(normal + pc * 3 + (c - 6), mask=m & (c >= 6) & (c < 9), other=0.0)
        sig = tl.where((c >= 6) & (c < 9), n, sig)
    tl.store(signal + pc * 9 + c, _sanitize(sig), mask=m & (c < 9))
    g = tl.zeros([BLOCK, 16], tl.float32)
    if HAS_DEPTH:
        d = tl.load(depth + p, mask=pm, other=0.0)
        g = tl.where(c == 0, d[:, None], g)
    if HAS_NORMAL:
        n = tl.load(normal + pc * 3 + (c - 1), mask=m & (c >= 1) & (c < 4), other=0.0)
        g = tl.where((c >= 1) & (c < 4), n, g)
    if HAS_ALBEDO:
        a = tl.load(albedo + pc * 3 + (c - 4), mask=m & (c >= 4) & (c < 7), other=0.0)
        g = tl.where((c >= 4) & (c < 7), a, g)
    unknown = tl.max(tl.where((c < 7) & (g != g), 1.0, 0.0), axis=1)
    g = tl.where(c == 7, unknown[:, None], _sanitize(g))
    tl.store(guide + pc * 8 + c, g, mask=m & (c < 8))


@triton.jit
def _guide(ptr, q, mask):
    """The 8 guide channels of pixels ``q``."""
    base = ptr + q * 8
    return (
        tl.load(base + 0, mask=mask, other=0.0),
        tl.load(base + 1, mask=mask, other=0.0),
        tl.load(base + 2, mask=mask, other=0.0),
        tl.load(base + 3, mask=mask, other=0.0),
        tl.load(base + 4, mask=mask, other=0.0),
        tl.load(base + 5, mask=mask, other=0.0),
        tl.load(base + 6, mask=mask, other=0.0),
        tl.load(base + 7, mask=mask, other=0.0),
    )


@triton.jit
def _normals_agree(g, q, cos_min):
    """`passes._normals_agree` of one tap."""
    ln = tl.sqrt_rn(g[1] * g[1] + g[2] * g[2] + g[3] * g[3])
    lp = tl.sqrt_rn(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
    aligned = (g[1] * q[1] + g[2] * q[2] + g[3] * q[3]) >= cos_min * (ln * lp)
    return aligned & ((ln > MIN_NORMAL_LENGTH) == (lp > MIN_NORMAL_LENGTH))


@triton.jit
def _depth_agrees(g, q, tolerance):
    """`passes._depth_agrees` of one tap."""
    near = tl.abs(g[0] - q[0]) <= tolerance * tl.maximum(tl.abs(g[0]), tl.abs(q[0]))
    return near | (g[0] == q[0])


@triton.jit
def _tap_tests(
    g,
    q,
    depth_tolerance,
    cos_min,
    albedo_tolerance,
    USE_DEPTH: tl.constexpr,
    USE_NORMAL: tl.constexpr,
    USE_ALBEDO: tl.constexpr,
):
    """`passes.tap_tests` of one tap: ``(geometry, output)``."""
    known = (g[7] == 0.0) & (q[7] == 0.0)
    aux = g[7] == g[7]  # all true (the flag is 0 or 1)
    if USE_NORMAL:
        aux = aux & _normals_agree(g, q, cos_min)
    if USE_ALBEDO:
        diff = tl.maximum(tl.maximum(tl.abs(g[4] - q[4]), tl.abs(g[5] - q[5])), tl.abs(g[6] - q[6]))
        aux = aux & (diff <= albedo_tolerance)
    if USE_DEPTH:
        geometry = known & _depth_agrees(g, q, depth_tolerance)
        surface = _depth_agrees(g, q, SURFACE_DEPTH)
        facing = _normals_agree(g, q, SILHOUETTE_NORMAL_COS)
        output = geometry & aux & (surface | facing)
    else:
        geometry = known & aux
        output = geometry
    return geometry, output


@triton.jit
def _catmull_rom_weights(t):
    t2 = t * t
    return (
        t * (-0.5 + t * (1.0 - 0.5 * t)),
        1.0 + t2 * (-2.5 + 1.5 * t),
        t * (0.5 + t * (2.0 - 1.5 * t)),
        t2 * (-0.5 + 0.5 * t),
    )


@_jit
def gather_kernel(
    motion,
    guide,
    prev_guide,
    signal,
    prev_state,
    out,
    lum,
    kept,
    height,
    width,
    limit,
    depth_tolerance,
    cos_min,
    albedo_tolerance,
    history,
    output_top,
    subpixel_tolerance,
    firefly_ratio,
    HAS_HISTORY: tl.constexpr,
    USE_DEPTH: tl.constexpr,
    USE_NORMAL: tl.constexpr,
    USE_ALBEDO: tl.constexpr,
    BLOCK: tl.constexpr,
):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pm = p < height * width
    c = tl.arange(0, 16)[None, :]
    y, x = p // width, p % width
    mx = tl.load(motion + p * 2, mask=pm, other=0.0)
    my = tl.load(motion + p * 2 + 1, mask=pm, other=0.0)
    usable = (tl.abs(mx) <= limit) & (tl.abs(my) <= limit)
    px = x.to(tl.float32) + tl.where(usable, mx, 0.0)
    py = y.to(tl.float32) + tl.where(usable, my, 0.0)
    x0f, y0f = tl.floor(px), tl.floor(py)
    fx, fy = px - x0f, py - y0f
    x0, y0 = x0f.to(tl.int32), y0f.to(tl.int32)
    if HAS_HISTORY:
        reads = pm
    else:
        reads = pm & (p < 0)  # nothing read: the empty history
    g = _guide(guide, p, pm)
    totals0 = tl.zeros([BLOCK], tl.float32)
    totals1 = tl.zeros([BLOCK], tl.float32)
    taken0 = tl.zeros([BLOCK], tl.int32)
    taken1 = tl.zeros([BLOCK], tl.int32)
    gathered = tl.zeros([BLOCK, 16], tl.float32)
    cubic = gathered
    low = gathered
    high = gathered
    cwx = _catmull_rom_weights(fx)
    cwy = _catmull_rom_weights(fy)
    # The 4x4 Catmull-Rom taps in the order of `passes._catmull_rom`; the four in the
    # middle are the bilinear taps of `passes.gather` (in its order), tested and summed
    # from the same loads. A tap is the state's 16 channels (the last two unused): whole
    # 16-byte vectors.
    for j in tl.static_range(4):
        yc = tl.minimum(tl.maximum(y0 + (j - 1), 0), height - 1)
        for i in tl.static_range(4):
            xs = x0 + (i - 1)
            q = yc * width + tl.minimum(tl.maximum(xs, 0), width - 1)
            prev = tl.load(prev_state + q[:, None] * 16 + c, mask=reads[:, None], other=0.0)
            cubic = cubic + (cwy[j] * cwx[i])[:, None] * prev
            if (i - 1) * (i - 2) + (j - 1) * (j - 2) == 0:  # i and j in 1, 2
                if i == 2:
                    wx = fx
                else:
                    wx = 1.0 - fx
                if j == 2:
                    weight = wx * fy
                else:
                    weight = wx * (1.0 - fy)
                ys = y0 + (j - 1)
                inside = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
                base = reads & usable & inside & (_col(prev, c, 9) > 0.0)
                geometry, output = _tap_tests(
                    g,
                    _guide(prev_guide, q, reads),
                    depth_tolerance,
                    cos_min,
                    albedo_tolerance,
                    USE_DEPTH,
                    USE_NORMAL,
                    USE_ALBEDO,
                )
                ok0, ok1 = base & geometry, base & output
                w0, w1 = tl.where(ok0, weight, 0.0), tl.where(ok1, weight, 0.0)
                totals0, totals1 = totals0 + w0, totals1 + w1
                taken0, taken1 = taken0 + ok0.to(tl.int32), taken1 + ok1.to(tl.int32)
                gathered = gathered + tl.where(c < 10, w0[:, None], w1[:, None]) * prev
                if i + j == 2:  # the first
                    low, high = prev, prev
                else:
                    low, high = tl.minimum(low, prev), tl.maximum(high, prev)
    valid, valid_out = totals0 >= MIN_TAP_WEIGHT, totals1 >= MIN_TAP_WEIGHT
    divisor = tl.where(
        c < 10,
        tl.where(valid, totals0, 1.0)[:, None],
        tl.where(valid_out, totals1, 1.0)[:, None],
    )
    hist = gathered / divisor
    cubic = tl.minimum(tl.maximum(cubic, low), high)
    hist = tl.where(tl.where(c < 10, (taken0 == 4)[:, None], (taken1 == 4)[:, None]), cubic, hist)
    tl.atomic_add(kept, tl.sum((valid & pm).to(tl.int32), axis=0))
    _accumulate(
        signal,
        out,
        lum,
        p,
        pm,
        c,
        hist,
        valid,
        valid_out,
        fx,
        fy,
        history,
        output_top,
        subpixel_tolerance,
        firefly_ratio,
        height * width,
    )


@triton.jit
def _accumulate(
    signal,
    out,
    lum,
    p,
    pm,
    c,
    hist,
    valid,
    valid_out,
    fx,
    fy,
    history,
    output_top,
    subpixel_tolerance,
    firefly_ratio,
    pixels,
):
    """`passes._accumulate` (with `passes._firefly_scale`), stored to ``out``; the
    light-change test's two luminances (the frame's color, its fireflies limited, and the
    reprojected output, clamped) to the planes of ``lum``."""
    whole = (tl.minimum(fx, 1.0 - fx) <= subpixel_tolerance) & (
        tl.minimum(fy, 1.0 - fy) <= subpixel_tolerance
    )
    accumulates = valid & whole
    hcount = _col(hist, c, 9)
    count = tl.where(accumulates, tl.minimum(hcount + 1.0, history), 1.0)
    alpha = 1.0 / count
    m = pm[:, None]
    sig = tl.load(signal + p[:, None] * 9 + c, mask=m & (c < 9), other=0.0)
    l_in = _lum(_col(sig, c, 0), _col(sig, c, 1), _col(sig, c, 2))
    l_out = _lum(
        tl.where(valid_out, _col(hist, c, 10), 0.0),
        tl.where(valid_out, _col(hist, c, 11), 0.0),
        tl.where(valid_out, _col(hist, c, 12), 0.0),
    )
    tl.store(lum + pixels + p, tl.minimum(tl.maximum(l_out, -MAX_LUM), MAX_LUM), mask=pm)
    # `passes._firefly_scale`: the accumulated input's luminance as the guide where it
    # holds 2 frames or more, else the reprojected output's (where its history is kept)
    inputs = accumulates & (hcount >= 2.0)
    guide = tl.where(inputs, _lum(_col(hist, c, 0), _col(hist, c, 1), _col(hist, c, 2)), l_out)
    limit = firefly_ratio * guide
    clip = (inputs | valid_out) & (limit > 0.0) & (l_in > limit)
    scale = tl.where(clip, limit / tl.where(clip, l_in, 1.0), 1.0)
    tl.store(lum + p, tl.minimum(tl.maximum(l_in * scale, -MAX_LUM), MAX_LUM), mask=pm)
    sig = tl.where(c < 3, sig * scale[:, None], sig)
    acc = hist + (sig - hist) * alpha[:, None]
    acc = tl.where((accumulates & (count > 1.0))[:, None], acc, sig)
    out_count = tl.where(valid_out, tl.minimum(_col(hist, c, 13) + 1.0, output_top), 1.0)
    result = tl.where(c == 15, scale[:, None], 0.0)
    result = tl.where(c == 14, out_count[:, None], result)
    result = tl.where(c == 13, valid.to(tl.float32)[:, None], result)
    result = tl.where(c < 13, tl.where(valid_out[:, None], hist, 0.0), result)
    result = tl.where(c == 9, count[:, None], result)
    result = tl.where(c < 9, acc, result)
    tl.store(out + p[:, None] * 16 + c, result, mask=m)


@_jit
def near_rows_kernel(repro, rows, height, width, MARGIN: tl.constexpr, BLOCK: tl.constexpr):
    """Pass 1c's row dilation: 1 where a pixel of the row within MARGIN has no history."""
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pm = p < height * width
    y, x = p // width, p % width
    near = tl.zeros([BLOCK], tl.float32)
    for d in range(0, 2 * MARGIN + 1):
        xs = x + (d - MARGIN)
        inside = pm & (xs >= 0) & (xs < width)
        valid = tl.load(repro + (y * width + xs) * 16 + 13, mask=inside, other=1.0)
        near = tl.where(valid < 0.5, 1.0, near)
    tl.store(rows + p, near, mask=pm)


@_jit
def reject_kernel(
    signal,
    repro,
    lum,
    rows,
    acc_color,
    acc_albedo,
    acc_normal,
    height,
    width,
    change_sigmas,
    change_output_history,
    ENABLED: tl.constexpr,
    MARGIN: tl.constexpr,
    BLOCK: tl.constexpr,
):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pm = p < height * width
    c = tl.arange(0, 16)[None, :]
    m = pm[:, None]
    tile = tl.load(repro + p[:, None] * 16 + c, mask=m, other=0.0)
    changed = p < 0  # none
    if ENABLED:
        y, x = p // width, p % width
        total = tl.zeros([BLOCK], tl.float32)
        squares = tl.zeros([BLOCK], tl.float32)
        total_previous = tl.zeros([BLOCK], tl.float32)
        for dy in tl.static_range(2 * CHANGE_RADIUS + 1):
            yc = tl.minimum(tl.maximum(y + (dy - CHANGE_RADIUS), 0), height - 1)
            for dx in tl.static_range(2 * CHANGE_RADIUS + 1):
                xc = tl.minimum(tl.maximum(x + (dx - CHANGE_RADIUS), 0), width - 1)
                q = yc * width + xc
                current = tl.load(lum + q, mask=pm, other=0.0)
                previous = tl.load(lum + height * width + q, mask=pm, other=0.0)
                total = total + current
                squares = squares + current * current
                total_previous = total_previous + previous
        inv = 1.0 / ((2 * CHANGE_RADIUS + 1) * (2 * CHANGE_RADIUS + 1))
        mean, mean_sq, mean_previous = total * inv, squares * inv, total_previous * inv
        error = tl.sqrt_rn(tl.maximum(mean_sq - mean * mean, 0.0)) / (2 * CHANGE_RADIUS + 1.0)
        changed = (tl.abs(mean - mean_previous) > change_sigmas * error) & (_col(tile, c, 13) > 0.5)
    near = p < 0  # the input history is also dropped near a pixel without history
    if MARGIN > 0:  # (pass 1c, columns of `rows`)
        y, x = p // width, p % width
        for d in range(0, 2 * MARGIN + 1):
            ys = y + (d - MARGIN)
            inside = pm & (ys >= 0) & (ys < height)
            near = near | (tl.load(rows + ys * width + x, mask=inside, other=0.0) > 0.5)
    if ENABLED or MARGIN > 0:
        sig = tl.load(signal + p[:, None] * 9 + c, mask=m & (c < 9), other=0.0)
        # where the light changed the frame's own signal, near a pixel without history
        # its color limited by the firefly factor (pass 1c runs after 1b)
        own = tl.where(c < 3, sig * _col(tile, c, 15)[:, None], sig)
        tile = tl.where(changed[:, None] & (c < 9), sig, tile)
        tile = tl.where(near[:, None] & (c < 9), own, tile)
        tile = tl.where((changed | near)[:, None] & (c == 9), 1.0, tile)
        tile = tl.where(changed[:, None] & (c == 14), tl.minimum(tile, change_output_history), tile)
        tl.store(repro + p[:, None] * 16 + c, tile, mask=m & ((c < 10) | (c == 14)))
    tl.store(acc_color + p[:, None] * 3 + c, tile, mask=m & (c < 3))
    tl.store(acc_albedo + p[:, None] * 3 + (c - 3), tile, mask=m & (c >= 3) & (c < 6))
    tl.store(acc_normal + p[:, None] * 3 + (c - 6), tile, mask=m & (c >= 6) & (c < 9))


@_jit
def stabilize_kernel(
    denoised,
    repro,
    out,
    state,
    height,
    width,
    clamp_gamma,
    CLAMP: tl.constexpr,
    R: tl.constexpr,
    BLOCK: tl.constexpr,
):
    p = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    pm = p < height * width
    c = tl.arange(0, 4)[None, :]
    m = pm[:, None] & (c < 3)
    den = tl.load(denoised + p[:, None] * 3 + c, mask=m, other=0.0)
    finite = tl.abs(den) <= FLT_MAX
    safe = tl.where(finite, den, 0.0)
    hist = tl.load(repro + p[:, None] * 16 + 10 + c, mask=m, other=0.0)
    if CLAMP != 0:
        y, x = p // width, p % width
        total = tl.zeros([BLOCK, 4], tl.float32)
        squares = tl.zeros([BLOCK, 4], tl.float32)
        low = total
        high = total
        for dy in tl.static_range(2 * R + 1):
            yc = tl.minimum(tl.maximum(y + (dy - R), 0), height - 1)
            for dx in tl.static_range(2 * R + 1):
                xc = tl.minimum(tl.maximum(x + (dx - R), 0), width - 1)
                q = (yc * width + xc)[:, None]
                w = tl.load(denoised + q * 3 + c, mask=m, other=0.0)
                w = tl.where(tl.abs(w) <= FLT_MAX, w, 0.0)
                if CLAMP == 2:
                    total = total + w
                    squares = squares + w * w
                elif dy * (2 * R + 1) + dx == 0:
                    low, high = w, w
                else:
                    low, high = tl.minimum(low, w), tl.maximum(high, w)
        if CLAMP == 2:
            inv = 1.0 / ((2 * R + 1) * (2 * R + 1))
            mean = total * inv
            spread = clamp_gamma * tl.sqrt_rn(tl.maximum(squares * inv - mean * mean, 0.0))
            low, high = mean - spread, mean + spread
        hist = tl.minimum(tl.maximum(hist, low), high)
    beta = 1.0 / tl.load(repro + p * 16 + 14, mask=pm, other=1.0)
    result = hist + (safe - hist) * beta[:, None]
    result = tl.where((beta >= 1.0)[:, None], safe, result)
    result = tl.where(finite, result, den)
    tl.store(out + p[:, None] * 3 + c, result, mask=m)
    kept = tl.where(result != result, 0.0, result)
    kept = tl.where(kept > FLT_MAX, MAX_SIGNAL, tl.where(kept < -FLT_MAX, -MAX_SIGNAL, kept))
    tl.store(state + p[:, None] * 16 + 10 + c, kept, mask=m)
    s = tl.arange(0, 16)[None, :]
    tile = tl.load(repro + p[:, None] * 16 + s, mask=pm[:, None] & (s < 10), other=0.0)
    count = tl.load(repro + p * 16 + 14, mask=pm, other=0.0)
    tile = tl.where(s == 13, count[:, None], tile)
    tl.store(state + p[:, None] * 16 + s, tile, mask=pm[:, None] & ((s < 10) | (s >= 13)))


# --- launches ------------------------------------------------------------------------------


def _grid(height: int, width: int) -> tuple[int]:
    return (triton.cdiv(height * width, BLOCK),)


def pack(color, albedo, normal, depth, signal, guide) -> None:
    """`pack_kernel`: ``signal`` ``[H, W, 9]`` and ``guide`` ``[H, W, 8]`` of one frame's
    contiguous float32 images (None: not given)."""
    height, width = color.shape[:2]
    pack_kernel[_grid(height, width)](
        color,
        color if albedo is None else albedo,
        color if normal is None else normal,
        color if depth is None else depth,
        signal,
        guide,
        height,
        width,
        HAS_ALBEDO=albedo is not None,
        HAS_NORMAL=normal is not None,
        HAS_DEPTH=depth is not None,
        BLOCK=BLOCK,
        num_warps=NUM_WARPS,
    )


def gather(
    motion,
    guide,
    prev_guide,
    signal,
    prev_state,
    out,
    lum,
    kept,
    params,
    *,
    has_history: bool,
) -> None:
    """`gather_kernel` into ``out`` ``[H, W, 16]`` and ``lum`` ``[2, H, W]``; adds the
    pixels that kept their history to the int32 ``kept``."""
    height, width = motion.shape[:2]
    f32 = np.float32
    output_top = float(f32(1) / f32(max(params.output_blend, 1e-6)))
    gather_kernel[_grid(height, width)](
        motion,
        guide,
        prev_guide,
        signal,
        prev_state,
        out,
        lum,
        kept,
        height,
        width,
        float(f32(height + width)),
        float(params.depth_tolerance),
        1.0 - params.normal_tolerance,
        float(params.albedo_tolerance),
        float(params.history),
        output_top,
        float(params.subpixel_tolerance),
        float(params.firefly_ratio),
        HAS_HISTORY=bool(has_history),
        USE_DEPTH=params.use_depth,
        USE_NORMAL=params.use_normal,
        USE_ALBEDO=params.use_albedo,
        BLOCK=BLOCK,
        num_warps=NUM_WARPS,
    )


def reject(signal, repro, lum, acc_color, acc_albedo, acc_normal, params, rows=None) -> None:
    """`reject_kernel`: the light-change test (pass 1b, from `gather`'s ``lum``) and the
    input history dropped near pixels without history (pass 1c, ``disocclusion_margin``:
    `near_rows_kernel`'s row dilation into ``rows``, an ``[H, W]`` float32 scratch made
    when None, then the columns in `reject_kernel`) on ``repro`` in place, and the
    accumulated images for the denoiser."""
    height, width = repro.shape[:2]
    margin = params.disocclusion_margin
    if margin and rows is None:
        rows = repro.new_empty((height, width))
    if margin:
        near_rows_kernel[_grid(height, width)](
            repro,
            rows,
            height,
            width,
            MARGIN=margin,
            BLOCK=BLOCK,
            num_warps=NUM_WARPS,
        )
    reject_kernel[_grid(height, width)](
        signal,
        repro,
        lum,
        repro if rows is None else rows,
        acc_color,
        acc_albedo,
        acc_normal,
        height,
        width,
        float(params.change_sigmas),
        float(np.float32(params.change_output_history)),
        ENABLED=params.change_sigmas != 0,
        MARGIN=margin,
        BLOCK=BLOCK,
        num_warps=NUM_WARPS,
    )


def stabilize(denoised, repro, out, state, params) -> None:
    """`stabilize_kernel`: the temporal output into ``out`` ``[H, W, 3]`` and the next
    state into ``state``."""
    height, width = repro.shape[:2]
    stabilize_kernel[_grid(height, width)](
        denoised,
        repro,
        out,
        state,
        height,
        width,
        float(params.clamp_gamma),
        CLAMP=CLAMP_IDS[params.clamp],
        R=params.clamp_radius,
        BLOCK=BLOCK,
        num_warps=NUM_WARPS,
    )
