"""What temporal mode adds to a frame's denoise: wall time per frame, NumPy in and out.

For each ``--backend``, one HDR colour + albedo + normal sequence of ``--size`` with a
one-pixel pan (whole-pixel motion, so the input history accumulates) and constant depth
is denoised per frame by `oidn_gpu.Denoiser` and by `oidn_gpu.temporal.TemporalDenoiser`
on the same backend; medians over ``--frames`` frames after ``--warmup`` (the first
frames compile kernels and start the history). The overhead is the temporal frame's
extra time over the per-frame denoise, as a share of the per-frame denoise.

On cuda (a GPU) it adds (`bench/temporal_overhead_cuda.py`): a row with torch CUDA
tensors in and out (the denoiser's device path against the session's
``frame_on_device``, CUDA events), the split of the temporal frame's extra work
(staging and upload of motion and depth, the four kernels, the history-count readback),
and the relative difference of the session's output from the host path's (NumPy passes,
same denoiser) over ``--check-frames`` frames.

    python bench/temporal_overhead.py --backend cuda --backend wgpu --size 1920x1080

``--session`` also drives the backend's device session (`Backend.temporal_session`)
directly on the same frames (`bench/temporal_session_overhead.py`): its median per frame,
the split of a profiled frame (GPU timestamps per phase where the device has them, and
host times), and its output against the host path (the backend's `TemporalPasses` around
`Denoiser.denoise` on host arrays, ``--compare`` frames from a restart).
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
            passes = td.session.name
    return {"backend": backend, "passes": passes, "per_frame_ms": per_frame,
            "temporal_ms": temporal, "overhead": temporal / per_frame - 1}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=[])
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=14)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--option", action="append", default=[],
                        help="backend:name=value, a Denoiser option for one backend")
    parser.add_argument("--check-frames", type=int, default=4,
                        help="cuda: frames compared with the host passes (0: none)")
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
        if args.temporal and backend == "cuda" and _has_gpu():
            import temporal_overhead_cuda

            rows.extend(temporal_overhead_cuda.measure(frames, args.warmup, options,
                                                       args.check_frames))
        elif args.temporal:
            row = measure(backend, frames, args.warmup, options)
            rows.append(row)
            print(f"{backend:9s} ({row['passes']} passes) {width}x{height}: per-frame "
                  f"{row['per_frame_ms']:.2f} ms, temporal {row['temporal_ms']:.2f} ms, "
                  f"overhead {100 * row['overhead']:.0f}%", flush=True)
        if args.session:
            import temporal_session_overhead as tso

            row = tso.measure_session(backend, frames, args.warmup, options, args.compare,
                                      _median_ms)
            print(tso.describe(backend, row, width, height), flush=True)
            if row is not None:
                rows.append(row)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


if __name__ == "__main__":
    main()
