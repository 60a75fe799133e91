"""What temporal mode adds to a frame's denoise: wall time per frame, NumPy in and out.

For each ``--backend``, one HDR colour + albedo + normal sequence of ``--size`` with a
one-pixel pan (whole-pixel motion, so the input history accumulates) and constant depth
is denoised per frame by `oidn_gpu.Denoiser` and by `oidn_gpu.temporal.TemporalDenoiser`
on the same backend; medians over ``--frames`` frames after ``--warmup`` (the first
frames compile kernels and start the history). The overhead is the temporal frame's
extra time over the per-frame denoise, as a share of the per-frame denoise.

    python bench/temporal_overhead.py --backend cuda --backend wgpu --size 1920x1080

``--session`` also drives the backend's device session (`Backend.temporal_session`)
directly on the same frames: its median per frame, the split of a profiled frame (GPU
timestamps per phase where the device has them, and host times), and its output against
the host path (the backend's `TemporalPasses` around `Denoiser.denoise` on host arrays,
``--compare`` frames from a restart).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

import oidn_gpu
from oidn_gpu.temporal import TemporalDenoiser


def sequence(height: int, width: int, frames: int, seed: int = 7) -> list[dict]:
    """Frames of a noisy gradient panned one pixel to the right per frame."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width + frames].astype(np.float32)
    scene = (0.5 + 0.4 * np.sin(x / 53.0) * np.cos(y / 37.0))[..., None] * np.ones(3, np.float32)
    albedo = np.clip(scene * 0.8, 0, 1)
    normal = np.zeros((height, width, 3), np.float32)
    normal[..., 2] = 1
    motion = np.zeros((height, width, 2), np.float32)
    motion[..., 0] = 1.0  # pixel (x, y) was at (x + 1, y) in the previous frame
    depth = np.full((height, width), 3.0, np.float32)
    out = []
    for t in range(frames):
        window = slice(frames - t, frames - t + width)
        color = scene[:, window] * rng.gamma(2.0, 0.5, (height, width, 3)).astype(np.float32)
        out.append({"color": color.astype(np.float32),
                    "albedo": np.ascontiguousarray(albedo[:, window]),
                    "normal": normal, "motion": motion, "depth": depth, "frame": t + 1})
    return out


def _median_ms(fn, items, warmup: int) -> float:
    times = []
    for index, item in enumerate(items):
        start = time.perf_counter()
        fn(item)
        if index >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def measure(backend: str, frames: list[dict], warmup: int, options: dict) -> dict:
    with oidn_gpu.Denoiser(hdr=True, backend=backend, **options) as den:
        per_frame = _median_ms(
            lambda f: den.denoise(f["color"], f["albedo"], f["normal"]), frames, warmup
        )
        with TemporalDenoiser(den) as td:
            temporal = _median_ms(lambda f: td.denoise(**f), frames, warmup)
            passes = td.passes.name if hasattr(td.passes, "name") else type(td.passes).__name__
    return {"backend": backend, "passes": passes, "per_frame_ms": per_frame,
            "temporal_ms": temporal, "overhead": temporal / per_frame - 1}


def _session_frame(frame: dict):
    from oidn_gpu.backends.base import TemporalFrame

    return TemporalFrame(frame["color"], frame["albedo"], frame["normal"], frame["motion"],
                         frame["depth"])


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
            rep = passes.reproject(f["motion"], guide, guide, signal,
                                   tp.empty_state(*f["color"].shape[:2]), params)
        denoised = den.denoise(*(np.ascontiguousarray(rep[:, :, c : c + 3]) for c in (0, 3, 6)))
        out = passes.stabilize(np.asarray(denoised, np.float32), rep, params)
        state = (tp.next_state(rep, out), guide)
        outputs.append(out)
    return outputs


def measure_session(backend: str, frames: list[dict], warmup: int, options: dict,
                    compare: int) -> dict | None:
    """The backend's device session on ``frames`` (None where it has none for HDR)."""
    from oidn_gpu.backends.base import get_backend
    from oidn_gpu.temporal import passes as tp

    params = tp.TemporalParams().with_guides(depth=True, normal=False, albedo=False)
    impl = get_backend(backend)
    with oidn_gpu.Denoiser(hdr=True, backend=backend, **options) as den:
        factory = getattr(impl, "temporal_session", None)
        session = factory(den) if factory is not None else None
        if session is None:
            return None
        per_frame = _median_ms(
            lambda f: den.denoise(f["color"], f["albedo"], f["normal"]), frames, warmup
        )
        restart = [True]

        def step(f: dict):
            return session.frame(_session_frame(f), params, restart=bool(restart and
                                                                         restart.pop()))

        session_ms = _median_ms(step, frames, warmup)
        session.profile = True
        split: dict[str, list[float]] = {}
        for index, f in enumerate(frames):
            step(f)
            if index >= warmup:
                for key, ms in [*(("gpu_" + k, v) for k, v in session.last_gpu_ms.items()),
                                *(("host_" + k, v) for k, v in session.last_host_ms.items())]:
                    split.setdefault(key, []).append(ms)
        session.profile = False
        passes = impl.temporal_passes(den.backend_options)
        expected = host_path(den, passes, frames[:compare], params)
        restart.append(True)
        got = [step(f).output for f in frames[:compare]]
        passes.close()
        session.close()
    diffs = [float(np.max(np.abs(g - e))) for g, e in zip(got, expected, strict=True)]
    rel = [float(np.linalg.norm(g - e) / max(np.linalg.norm(e), 1e-30))
           for g, e in zip(got, expected, strict=True)]
    return {"backend": backend, "per_frame_ms": per_frame, "session_ms": session_ms,
            "session_overhead": session_ms / per_frame - 1,
            "split_ms": {k: statistics.median(v) for k, v in split.items()},
            "compare_frames": compare, "max_abs_diff": max(diffs), "max_rel_l2": max(rel),
            "bit_equal_frames": sum(np.array_equal(g, e) for g, e in zip(got, expected))}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=[])
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=14)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--option", action="append", default=[],
                        help="backend:name=value, a Denoiser option for one backend")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--session", action="store_true",
                        help="also drive the backend's device session directly")
    parser.add_argument("--no-temporal", dest="temporal", action="store_false",
                        help="skip TemporalDenoiser (with --session: the session alone)")
    parser.add_argument("--compare", type=int, default=4,
                        help="frames compared with the host path (--session)")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    frames = sequence(height, width, args.frames)
    rows = []
    for backend in args.backend or ["reference"]:
        options = {}
        for text in args.option:
            name, _, rest = text.partition(":")
            key, _, value = rest.partition("=")
            if name == backend:
                options[key] = value
        if args.temporal:
            row = measure(backend, frames, args.warmup, options)
            rows.append(row)
            print(f"{backend:9s} ({row['passes']} passes) {width}x{height}: per-frame "
                  f"{row['per_frame_ms']:.2f} ms, temporal {row['temporal_ms']:.2f} ms, "
                  f"overhead {100 * row['overhead']:.0f}%", flush=True)
        if args.session:
            row = measure_session(backend, frames, args.warmup, options, args.compare)
            if row is None:
                print(f"{backend:9s}: no device session", flush=True)
                continue
            rows.append(row)
            split = ", ".join(f"{k} {v:.2f}" for k, v in row["split_ms"].items())
            print(f"{backend:9s} (device session) {width}x{height}: per-frame "
                  f"{row['per_frame_ms']:.2f} ms, session {row['session_ms']:.2f} ms, overhead "
                  f"{100 * row['session_overhead']:.1f}%; split (ms, medians): {split}; against "
                  f"the host path over {row['compare_frames']} frames: max |diff| "
                  f"{row['max_abs_diff']:.3g}, max rel L2 {row['max_rel_l2']:.3g}, "
                  f"{row['bit_equal_frames']} bit-equal", flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
