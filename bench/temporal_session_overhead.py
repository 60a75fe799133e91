"""The device session's row of `bench/temporal_overhead.py` (``--session``): a backend's
`Backend.temporal_session` driven directly, NumPy in and out, against the host path.

    python bench/temporal_overhead.py --backend wgpu --size 1920x1080 --session
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

import numpy as np

import oidn_gpu


def _session_frame(frame: dict):
    from oidn_gpu.backends.base import TemporalFrame

    return TemporalFrame(
        frame["color"], frame["albedo"], frame["normal"], frame["motion"], frame["depth"]
    )


def host_path(den, passes, frames: list[dict], params) -> list[np.ndarray]:
    """The temporal outputs of the host path: ``passes`` on host arrays around
    ``den.denoise`` (what `TemporalDenoiser` runs without a device session)."""
    from oidn_gpu.temporal import passes as tp

    outputs, state = [], None
    for f in frames:
        signal = tp.pack_signal(f["color"], f["albedo"], f["normal"])
        guide = tp.pack_guide(f["depth"], f["albedo"], f["normal"])
        prev_state, prev_guide = state or (tp.empty_state(*f["color"].shape[:2]), guide)
        rep = passes.reproject(f["motion"], guide, prev_guide, signal, prev_state, params)
        if state is not None and 1.0 - tp.history_fraction(rep) > params.cut_threshold:
            rep = passes.reproject(
                f["motion"], guide, guide, signal, tp.empty_state(*f["color"].shape[:2]), params
            )
        denoised = den.denoise(*(np.ascontiguousarray(rep[:, :, c : c + 3]) for c in (0, 3, 6)))
        out = passes.stabilize(np.asarray(denoised, np.float32), rep, params)
        state = (tp.next_state(rep, out), guide)
        outputs.append(out)
    return outputs


def measure_session(
    backend: str,
    frames: list[dict],
    warmup: int,
    options: dict,
    compare: int,
    median_ms: Callable[..., float],
) -> dict | None:
    """The backend's device session on ``frames`` (None where it has none for HDR):
    the per-frame denoise and the session timed by ``median_ms(fn, frames, warmup)``, the
    split of profiled frames, and ``compare`` frames against `host_path`."""
    from oidn_gpu.backends.base import get_backend
    from oidn_gpu.temporal import passes as tp

    params = tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False)
    impl = get_backend(backend)
    with oidn_gpu.Denoiser(hdr=True, backend=backend, **options) as den:
        factory = getattr(impl, "temporal_session", None)
        session = factory(den.frames) if factory is not None else None
        if session is None:
            return None
        per_frame = median_ms(
            lambda f: den.denoise(f["color"], f["albedo"], f["normal"]), frames, warmup
        )
        restart = [True]

        def step(f: dict):
            return session.frame(_session_frame(f), params, restart=bool(restart and restart.pop()))

        session_ms = median_ms(step, frames, warmup)
        session.profile = True
        split: dict[str, list[float]] = {}
        for index, f in enumerate(frames):
            step(f)
            if index >= warmup:
                for key, ms in [
                    *(("gpu_" + k, v) for k, v in session.last_gpu_ms.items()),
                    *(("host_" + k, v) for k, v in session.last_host_ms.items()),
                ]:
                    split.setdefault(key, []).append(ms)
        session.profile = False
        passes = impl.temporal_passes(den.backend_options)
        expected = host_path(den, passes, frames[:compare], params)
        restart.append(True)
        got = [step(f).output for f in frames[:compare]]
        passes.close()
        session.close()
    diffs = [float(np.max(np.abs(g - e))) for g, e in zip(got, expected, strict=True)]
    rel = [
        float(np.linalg.norm(g - e) / max(np.linalg.norm(e), 1e-30))
        for g, e in zip(got, expected, strict=True)
    ]
    return {
        "backend": backend,
        "per_frame_ms": per_frame,
        "session_ms": session_ms,
        "session_overhead": session_ms / per_frame - 1,
        "split_ms": {k: statistics.median(v) for k, v in split.items()},
        "compare_frames": compare,
        "max_abs_diff": max(diffs),
        "max_rel_l2": max(rel),
        "bit_equal_frames": sum(np.array_equal(g, e) for g, e in zip(got, expected, strict=True)),
    }


def describe(backend: str, row: dict | None, width: int, height: int) -> str:
    """The row's line of the log."""
    if row is None:
        return f"{backend:9s}: no device session"
    split = ", ".join(f"{k} {v:.2f}" for k, v in row["split_ms"].items())
    return (
        f"{backend:9s} (device session) {width}x{height}: per-frame "
        f"{row['per_frame_ms']:.2f} ms, session {row['session_ms']:.2f} ms, overhead "
        f"{100 * row['session_overhead']:.1f}%; split (ms, medians): {split}; against "
        f"the host path over {row['compare_frames']} frames: max |diff| "
        f"{row['max_abs_diff']:.3g}, max rel L2 {row['max_rel_l2']:.3g}, "
        f"{row['bit_equal_frames']} bit-equal"
    )
