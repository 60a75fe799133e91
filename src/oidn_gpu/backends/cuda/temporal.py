"""The temporal mode's passes in torch (the cuda backend's `TemporalPasses`).

The same arithmetic as the NumPy oracle `oidn_gpu.temporal.passes`, in float32 tensor
operations in the same order, on the backend's device (any torch device: the tests run it
on CPU tensors). Images arrive as host arrays and go back as host arrays, one upload and
one readback per pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from oidn_gpu.temporal import passes as tp


def _device(option: Any) -> Any:
    import torch

    if option is None:
        return torch.device("cuda", torch.cuda.current_device())
    if isinstance(option, int):
        return torch.device("cuda", option)
    return torch.device(option)


def session_device(option: Any, interpreting: bool) -> Any:
    """The device of a cuda denoiser's temporal session: the option's, else the current
    CUDA device, else (under Triton's interpreter) the CPU; None: no device runs the
    kernels."""
    import torch

    if option is not None or torch.cuda.is_available():
        device = _device(option)
        return device if device.type == "cuda" or interpreting else None
    return torch.device("cpu") if interpreting else None


class TorchTemporalPasses:
    """`TemporalPasses` on a torch device."""

    name = "torch"

    def __init__(self, device: Any = None) -> None:
        self.device = _device(device)

    def _upload(self, array: np.ndarray) -> Any:
        import torch

        return torch.from_numpy(np.ascontiguousarray(array, np.float32)).to(self.device)

    def reproject(self, motion, guide, prev_guide, signal, prev_state, params) -> np.ndarray:
        tensors = [self._upload(a) for a in (motion, guide, prev_guide, signal, prev_state)]
        return reproject(*tensors, params).cpu().numpy()

    def stabilize(self, denoised, reprojection, params) -> np.ndarray:
        out = stabilize(self._upload(denoised[:, :, :3]), self._upload(reprojection), params)
        return out.cpu().numpy()

    def close(self) -> None:
        pass


def _f(value: float, like: Any) -> Any:
    import torch

    return torch.tensor(value, dtype=torch.float32, device=like.device)


def _dot3(a: Any, b: Any) -> Any:
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _normals_agree(guide: Any, prev: Any, cos_min: float) -> Any:
    """`oidn_gpu.temporal.passes._normals_agree` on tensors."""
    import torch

    n, p = guide[..., 1:4], prev[..., 1:4]
    ln, lp = torch.sqrt(_dot3(n, n)), torch.sqrt(_dot3(p, p))
    aligned = _dot3(n, p) >= _f(cos_min, n) * (ln * lp)
    small = _f(tp.MIN_NORMAL_LENGTH, n)
    return aligned & ((ln > small) == (lp > small))


def _depth_agrees(guide: Any, prev: Any, tolerance: float) -> Any:
    """`oidn_gpu.temporal.passes._depth_agrees` on tensors."""
    import torch

    d, p = guide[..., 0], prev[..., 0]
    near = (d - p).abs() <= _f(tolerance, d) * torch.maximum(d.abs(), p.abs())
    return near | (d == p)


def _tap_tests(guide: Any, prev: Any, params: tp.TemporalParams) -> tuple[Any, Any]:
    """`oidn_gpu.temporal.passes.tap_tests` on tensors."""
    import torch

    known = (guide[..., tp.GUIDE_UNKNOWN] == 0) & (prev[..., tp.GUIDE_UNKNOWN] == 0)
    aux = torch.ones(guide.shape[:2], dtype=torch.bool, device=guide.device)
    if params.use_normal:
        aux &= _normals_agree(guide, prev, 1.0 - params.normal_tolerance)
    if params.use_albedo:
        a, p = guide[..., 4:7], prev[..., 4:7]
        diff = torch.maximum(
            torch.maximum((a[..., 0] - p[..., 0]).abs(), (a[..., 1] - p[..., 1]).abs()),
            (a[..., 2] - p[..., 2]).abs(),
        )
        aux &= diff <= _f(params.albedo_tolerance, a)
    if not params.use_depth:
        geometry = known & aux
        return geometry, geometry
    geometry = known & _depth_agrees(guide, prev, params.depth_tolerance)
    surface = _depth_agrees(guide, prev, tp.SURFACE_DEPTH)
    facing = _normals_agree(guide, prev, tp.SILHOUETTE_NORMAL_COS)
    return geometry, geometry & aux & (surface | facing)


def _by_group(signal_part: Any, output_part: Any) -> Any:
    import torch

    return torch.cat(
        [
            signal_part[..., None].expand(*signal_part.shape, tp.STATE_OUTPUT),
            output_part[..., None].expand(*output_part.shape, tp.GATHERED - tp.STATE_OUTPUT),
        ],
        dim=-1,
    )


def _catmull_rom_weights(t: Any) -> tuple[Any, ...]:
    t2 = t * t
    return (
        t * (-0.5 + t * (1.0 - 0.5 * t)),
        1.0 + t2 * (-2.5 + 1.5 * t),
        t * (0.5 + t * (2.0 - 1.5 * t)),
        t2 * (-0.5 + 0.5 * t),
    )


def _luminance(rgb: Any) -> Any:
    r, g, b = tp.LUMINANCE
    return (_f(r, rgb) * rgb[..., 0] + _f(g, rgb) * rgb[..., 1]) + _f(b, rgb) * rgb[..., 2]


def reproject(motion, guide, prev_guide, signal, prev_state, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes.reproject` on tensors."""
    gathered = gather(motion, guide, prev_guide, signal, prev_state, params)
    return drop_near_disocclusions(signal, reject_changes(signal, gathered, params), params)


def drop_near_disocclusions(signal, reprojection, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes.drop_near_disocclusions` on tensors: the dilation as max
    pools of the 0/1 mask over a row and then a column window (exact; their -inf padding
    counts off the image as history kept)."""
    import torch

    margin = params.disocclusion_margin
    if margin == 0:
        return reprojection
    pool = torch.nn.functional.max_pool2d
    rejected = (reprojection[..., tp.REPROJECTION_VALID] < 0.5).to(torch.float32)[None, None]
    size = 2 * margin + 1
    rows = pool(rejected, (1, size), stride=1, padding=(0, margin))
    near = pool(rows, (size, 1), stride=1, padding=(margin, 0))[0, 0] > 0.5
    out = reprojection.clone()
    out[..., : tp.SIGNAL_CHANNELS] = torch.where(
        near[..., None], limited_signal(signal, reprojection), out[..., : tp.SIGNAL_CHANNELS]
    )
    one = torch.ones((), dtype=torch.float32, device=out.device)
    out[..., tp.STATE_COUNT] = torch.where(near, one, out[..., tp.STATE_COUNT])
    return out


def limited_signal(signal, reprojection):
    """`oidn_gpu.temporal.passes.limited_signal` on tensors."""
    out = signal.clone()
    scale = reprojection[..., tp.REPROJECTION_INPUT_SCALE]
    out[..., 0:3] = signal[..., 0:3] * scale[..., None]
    return out


def _box(image):
    import torch

    r = tp.CHANGE_RADIUS
    height, width = image.shape
    padded = torch.nn.functional.pad(image[None, None], (r, r, r, r), mode="replicate")[0, 0]
    total = torch.zeros_like(image)
    for dy in range(2 * r + 1):
        for dx in range(2 * r + 1):
            total = total + padded[dy : dy + height, dx : dx + width]
    return total * _f(1.0 / (2 * r + 1) ** 2, image)


def reject_changes(signal, reprojection, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes.reject_changes` on tensors."""
    import torch

    if params.change_sigmas == 0:
        return reprojection
    top = float(np.float32(tp.MAX_CHANGE_LUMINANCE))
    scale = reprojection[..., tp.REPROJECTION_INPUT_SCALE]
    current = (_luminance(signal[..., 0:3]) * scale).clamp(-top, top)
    previous = _luminance(reprojection[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3]).clamp(-top, top)
    mean, squares = _box(current), _box(current * current)
    error = torch.sqrt(torch.clamp(squares - mean * mean, min=0.0)) / float(
        2 * tp.CHANGE_RADIUS + 1
    )
    changed = ((mean - _box(previous)).abs() > _f(params.change_sigmas, mean) * error) & (
        reprojection[..., tp.REPROJECTION_VALID] > 0.5
    )
    out = reprojection.clone()
    out[..., : tp.SIGNAL_CHANNELS] = torch.where(
        changed[..., None], signal, out[..., : tp.SIGNAL_CHANNELS]
    )
    one = torch.ones((), dtype=torch.float32, device=out.device)
    out[..., tp.STATE_COUNT] = torch.where(changed, one, out[..., tp.STATE_COUNT])
    count = out[..., tp.REPROJECTION_OUTPUT_COUNT]
    kept = torch.clamp(count, max=float(np.float32(params.change_output_history)))
    out[..., tp.REPROJECTION_OUTPUT_COUNT] = torch.where(changed, kept, count)
    return out


def gather(motion, guide, prev_guide, signal, prev_state, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes.gather` on tensors."""
    import torch

    height, width = motion.shape[:2]
    dev = motion.device
    limit = float(height + width)
    usable = (motion[..., 0].abs() <= limit) & (motion[..., 1].abs() <= limit)
    rows, cols = torch.meshgrid(
        torch.arange(height, dtype=torch.float32, device=dev),
        torch.arange(width, dtype=torch.float32, device=dev),
        indexing="ij",
    )
    zero = torch.zeros((), dtype=torch.float32, device=dev)
    px = cols + torch.where(usable, motion[..., 0], zero)
    py = rows + torch.where(usable, motion[..., 1], zero)
    x0, y0 = torch.floor(px), torch.floor(py)
    fx, fy = px - x0, py - y0
    x0i, y0i = x0.long(), y0.long()
    taps = (
        (0, 0, (1 - fx) * (1 - fy)),
        (1, 0, fx * (1 - fy)),
        (0, 1, (1 - fx) * fy),
        (1, 1, fx * fy),
    )
    g = tp.GATHERED
    totals = [torch.zeros((height, width), dtype=torch.float32, device=dev) for _ in "so"]
    taken = [torch.zeros((height, width), dtype=torch.int32, device=dev) for _ in "so"]
    gathered = torch.zeros((height, width, g), dtype=torch.float32, device=dev)
    low = torch.full((height, width, g), float("inf"), dtype=torch.float32, device=dev)
    high = torch.full((height, width, g), float("-inf"), dtype=torch.float32, device=dev)
    for dx, dy, weight in taps:
        xs, ys = x0i + dx, y0i + dy
        inside = (xs >= 0) & (xs < width) & (ys >= 0) & (ys < height)
        xc, yc = xs.clamp(0, width - 1), ys.clamp(0, height - 1)
        prev = prev_state[yc, xc, :g]
        base = usable & inside & (prev[..., tp.STATE_COUNT] > 0)
        oks = [base & test for test in _tap_tests(guide, prev_guide[yc, xc], params)]
        ws = [torch.where(ok, weight, zero) for ok in oks]
        for group in (0, 1):
            totals[group] = totals[group] + ws[group]
            taken[group] = taken[group] + oks[group].int()
        gathered = gathered + _by_group(ws[0], ws[1]) * prev
        low, high = torch.minimum(low, prev), torch.maximum(high, prev)
    valid, valid_out = (t >= tp.MIN_TAP_WEIGHT for t in totals)
    one_t = torch.ones_like(totals[0])
    divisor = _by_group(
        torch.where(valid, totals[0], one_t), torch.where(valid_out, totals[1], one_t)
    )
    history = gathered / divisor
    cubic = _catmull_rom(prev_state, x0i, y0i, fx, fy)
    cubic = torch.minimum(torch.maximum(cubic, low), high)
    history = torch.where(_by_group(taken[0] == 4, taken[1] == 4), cubic, history)
    return _accumulate(signal, history, valid, valid_out, fx, fy, params)


def _accumulate(signal, history, valid, valid_out, fx, fy, params: tp.TemporalParams):
    import torch

    height, width = valid.shape
    dev = valid.device
    zero = torch.zeros((), dtype=torch.float32, device=dev)
    tol = params.subpixel_tolerance
    whole = (torch.minimum(fx, 1 - fx) <= tol) & (torch.minimum(fy, 1 - fy) <= tol)
    accumulates = valid & whole
    one = torch.ones((), dtype=torch.float32, device=dev)
    count = torch.minimum(history[..., tp.STATE_COUNT] + 1, _f(params.history, fx))
    count = torch.where(accumulates, count, one)
    alpha = 1 / count
    acc = history[..., : tp.SIGNAL_CHANNELS]
    scale = _firefly_scale(signal, history, valid_out, accumulates, params)
    signal = signal.clone()
    signal[..., 0:3] = signal[..., 0:3] * scale[..., None]
    acc = acc + (signal - acc) * alpha[..., None]
    acc = torch.where((accumulates & (count > 1))[..., None], acc, signal)
    out = torch.zeros((height, width, tp.REPROJECTION_CHANNELS), dtype=torch.float32, device=dev)
    out[..., : tp.SIGNAL_CHANNELS] = acc
    out[..., tp.STATE_COUNT] = count
    previous = history[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3]
    out[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3] = torch.where(
        valid_out[..., None], previous, zero
    )
    out[..., tp.REPROJECTION_VALID] = valid.float()
    top = _f(1.0, fx) / _f(max(params.output_blend, 1e-6), fx)
    out_count = torch.minimum(history[..., tp.STATE_OUTPUT_COUNT] + 1, top)
    out[..., tp.REPROJECTION_OUTPUT_COUNT] = torch.where(valid_out, out_count, one)
    out[..., tp.REPROJECTION_INPUT_SCALE] = scale
    return out


def _firefly_scale(signal, history, valid_out, accumulates, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes._firefly_scale` on tensors."""
    import torch

    one = torch.ones((), dtype=torch.float32, device=signal.device)
    if params.firefly_ratio == 0:
        return torch.ones_like(valid_out, dtype=torch.float32)
    l_in = _luminance(signal[..., 0:3])
    inputs = accumulates & (history[..., tp.STATE_COUNT] >= 2)
    guide = torch.where(
        inputs,
        _luminance(history[..., 0:3]),
        _luminance(history[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3]),
    )
    limit = _f(params.firefly_ratio, signal) * guide
    clip = (inputs | valid_out) & (limit > 0) & (l_in > limit)
    return torch.where(clip, limit / torch.where(clip, l_in, one), one)


def _catmull_rom(state, x0, y0, fx, fy):
    import torch

    height, width = state.shape[:2]
    wx, wy = _catmull_rom_weights(fx), _catmull_rom_weights(fy)
    out = torch.zeros((*fx.shape, tp.GATHERED), dtype=torch.float32, device=fx.device)
    for j in range(4):
        yc = (y0 + (j - 1)).clamp(0, height - 1)
        for i in range(4):
            xc = (x0 + (i - 1)).clamp(0, width - 1)
            out = out + (wy[j] * wx[i])[..., None] * state[yc, xc, : tp.GATHERED]
    return out


def stabilize(denoised, reprojection, params: tp.TemporalParams):
    """`oidn_gpu.temporal.passes.stabilize` on tensors."""
    import torch

    finite = torch.isfinite(denoised)
    safe = torch.where(finite, denoised, torch.zeros((), device=denoised.device))
    history = reprojection[..., tp.STATE_OUTPUT : tp.STATE_OUTPUT + 3]
    if params.clamp != "none":
        low, high = _bounds(safe, params)
        history = torch.minimum(torch.maximum(history, low), high)
    beta = 1 / reprojection[..., tp.REPROJECTION_OUTPUT_COUNT]
    out = history + (safe - history) * beta[..., None]
    out = torch.where((beta >= 1)[..., None], safe, out)
    return torch.where(finite, out, denoised)


def _bounds(image, params: tp.TemporalParams):
    import torch

    r = params.clamp_radius
    height, width = image.shape[:2]
    padded = torch.nn.functional.pad(image.permute(2, 0, 1)[None], (r, r, r, r), mode="replicate")[
        0
    ].permute(1, 2, 0)
    windows = [
        padded[dy : dy + height, dx : dx + width]
        for dy in range(2 * r + 1)
        for dx in range(2 * r + 1)
    ]
    if params.clamp == "variance":
        total = torch.zeros_like(image)
        squares = torch.zeros_like(image)
        for window in windows:
            total = total + window
            squares = squares + window * window
        inv = _f(1.0 / len(windows), image)
        mean = total * inv
        sigma = torch.sqrt(torch.clamp(squares * inv - mean * mean, min=0.0))
        spread = _f(params.clamp_gamma, image) * sigma
        return mean - spread, mean + spread
    low, high = windows[0], windows[0]
    for window in windows[1:]:
        low, high = torch.minimum(low, window), torch.maximum(high, window)
    return low, high
