"""What temporal mode adds to a frame's denoise: wall time per frame, NumPy in and out.

For each ``--backend``, one HDR colour + albedo + normal sequence of ``--size`` with a
one-pixel pan (whole-pixel motion, so the input history accumulates) and constant depth
is denoised per frame by `oidn_gpu.Denoiser` and by `oidn_gpu.TemporalDenoiser`
on the same backend; medians over ``--frames`` frames after ``--warmup`` (the first
frames compile kernels and start the history). The overhead is the temporal frame's
extra time over the per-frame denoise, as a share of the per-frame denoise: per call
(`Denoiser.denoise` against `TemporalDenoiser.denoise`) and over the sequence
(`Denoiser.denoise_many` against `TemporalDenoiser.denoise_many`, the time between two
results; both overlap a frame's uploads with the GPU's work where the backend can), and
per call again with the two calls taking turns frame by frame (the same conditions for
both: the GPU's clocks and the host's load drift between separate runs). The
temporal `denoise_many` results are checked bit for bit against `denoise`'s. Where the
temporal session profiles (wgpu), a profiled `denoise_many` adds the medians of its GPU
timestamps per phase and per kernel.

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
from oidn_gpu import TemporalDenoiser


def sequence(height: int, width: int, frames: int, seed: int = 7) -> list[dict]:
    """Frames of a noisy gradient panned one pixel to the right per frame."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0 : width + frames].astype(np.float32)
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
        out.append(
            {
                "color": color.astype(np.float32),
                "albedo": np.ascontiguousarray(albedo[:, window]),
                "normal": normal,
                "motion": motion,
                "depth": depth,
                "frame": t + 1,
            }
        )
    return out


def _median_ms(fn, items, warmup: int) -> float:
    times = []
    for index, item in enumerate(items):
        start = time.perf_counter()
        fn(item)
        if index >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _median_between_ms(results, warmup: int, check=None) -> float:
    """The median time between two of ``results`` (an iterator) after ``warmup``;
    ``check(index, result)`` sees each."""
    times, last = [], time.perf_counter()
    for index, result in enumerate(results):
        now = time.perf_counter()
        if index >= warmup:
            times.append((now - last) * 1e3)
        last = now
        if check is not None:
            check(index, result)
    return statistics.median(times)


def measure(backend: str, frames: list[dict], warmup: int, options: dict) -> dict:
    with oidn_gpu.Denoiser(hdr=True, backend=backend, **options) as den:
        per_frame = _median_ms(
            lambda f: den.denoise(f["color"], f["albedo"], f["normal"]), frames, warmup
        )
        per_frame_many = _median_between_ms(
            den.denoise_many((f["color"], f["albedo"], f["normal"]) for f in frames), warmup
        )
        outputs = []
        with TemporalDenoiser(den) as td:
            temporal = _median_ms(lambda f: outputs.append(td.denoise(**f)), frames, warmup)
            passes = td.session.name
        equal = []
        with TemporalDenoiser(den) as td:
            temporal_many = _median_between_ms(
                td.denoise_many(frames),
                warmup,
                lambda i, out: equal.append(np.array_equal(out, outputs[i])),
            )
        row = {
            "backend": backend,
            "passes": passes,
            "per_frame_ms": per_frame,
            "temporal_ms": temporal,
            "overhead": temporal / per_frame - 1,
            "per_frame_many_ms": per_frame_many,
            "temporal_many_ms": temporal_many,
            "overhead_many": temporal_many / per_frame_many - 1,
            "many_bit_equal_frames": sum(equal),
            "frames": len(frames),
            "warmup": warmup,
        }
        row.update(_interleaved(den, frames, warmup))
        row.update(_profiled_many(den, frames, warmup))
    return row


def _interleaved(den, frames: list[dict], warmup: int) -> dict:
    """Per call again, each frame denoised by `Denoiser.denoise` and then by
    `TemporalDenoiser.denoise` in turn (the two under the same conditions): the medians,
    and the median over frames of the temporal call's time over the per-frame call's."""
    times: dict[str, list[float]] = {"denoise": [], "temporal": []}
    with TemporalDenoiser(den) as td:
        for index, f in enumerate(frames):
            for key, call in (
                ("denoise", lambda f=f: den.denoise(f["color"], f["albedo"], f["normal"])),
                ("temporal", lambda f=f: td.denoise(**f)),
            ):
                start = time.perf_counter()
                call()
                if index >= warmup:
                    times[key].append((time.perf_counter() - start) * 1e3)
    ratios = [t / d - 1 for d, t in zip(times["denoise"], times["temporal"], strict=True)]
    return {
        "interleaved_per_frame_ms": statistics.median(times["denoise"]),
        "interleaved_temporal_ms": statistics.median(times["temporal"]),
        "interleaved_overhead": statistics.median(ratios),
    }


def _profiled_many(den, frames: list[dict], warmup: int) -> dict:
    """Medians of the session's GPU timestamps over a profiled `denoise_many`, per phase
    (``gpu_ms``), per kernel (``kernel_ms``, a second profiled run: each kernel then has a
    compute pass of its own) and its host times (``host_ms``); {} without them."""
    split: dict[str, dict[str, list[float]]] = {"gpu_ms": {}, "kernel_ms": {}, "host_ms": {}}
    for kernels in (False, True):
        with TemporalDenoiser(den) as td:
            session = td.session
            if not hasattr(session, "profile_kernels"):
                return {}
            session.profile, session.profile_kernels = True, kernels

            def collect(index: int, _out, session=session, kernels=kernels) -> None:
                if index < warmup:
                    return
                seen = (
                    {"kernel_ms": session.last_kernel_ms}
                    if kernels
                    else {"gpu_ms": session.last_gpu_ms, "host_ms": session.last_host_ms}
                )
                for group, values in seen.items():
                    for key, ms in values.items():
                        split[group].setdefault(key, []).append(ms)

            _median_between_ms(td.denoise_many(frames), warmup, collect)
            prefetched = session.prefetched
    medians = {
        group: {k: statistics.median(v) for k, v in values.items()}
        for group, values in split.items()
    }
    return {**medians, "prefetched_frames": prefetched}


def describe(row: dict, width: int, height: int) -> str:
    lines = [
        f"{row['backend']:9s} ({row['passes']} passes) {width}x{height}, medians of "
        f"{row['frames'] - row['warmup']} frames after {row['warmup']}:",
        f"  per call:  Denoiser.denoise {row['per_frame_ms']:.2f} ms, TemporalDenoiser.denoise "
        f"{row['temporal_ms']:.2f} ms, overhead {100 * row['overhead']:.1f}%",
        f"  per call, interleaved: Denoiser.denoise {row['interleaved_per_frame_ms']:.2f} ms, "
        f"TemporalDenoiser.denoise {row['interleaved_temporal_ms']:.2f} ms, overhead (median "
        f"over frames) {100 * row['interleaved_overhead']:.1f}%",
        f"  sequence:  Denoiser.denoise_many {row['per_frame_many_ms']:.2f} ms, "
        f"TemporalDenoiser.denoise_many {row['temporal_many_ms']:.2f} ms, overhead "
        f"{100 * row['overhead_many']:.1f}%",
        f"  temporal denoise_many bit-equal to denoise: {row['many_bit_equal_frames']} of "
        f"{row['frames']} frames",
    ]
    for group in ("gpu_ms", "kernel_ms", "host_ms"):
        if row.get(group):
            parts = ", ".join(f"{k} {v:.3f}" for k, v in row[group].items())
            lines.append(f"  {group} (profiled denoise_many): {parts}")
    if "prefetched_frames" in row:
        lines.append(f"  frames found staged by prefetch: {row['prefetched_frames']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", action="append", default=[])
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--frames", type=int, default=14)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        help="backend:name=value, a Denoiser option for one backend",
    )
    parser.add_argument(
        "--check-frames",
        type=int,
        default=4,
        help="cuda: frames compared with the host passes (0: none)",
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--session", action="store_true", help="also drive the backend's device session directly"
    )
    parser.add_argument(
        "--no-temporal",
        dest="temporal",
        action="store_false",
        help="skip TemporalDenoiser (with --session: the session alone)",
    )
    parser.add_argument(
        "--compare", type=int, default=4, help="frames compared with the host path (--session)"
    )
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

            rows.extend(
                temporal_overhead_cuda.measure(
                    frames, args.warmup, options, args.check_frames, _median_ms, _median_between_ms
                )
            )
        elif args.temporal:
            row = measure(backend, frames, args.warmup, options)
            rows.append(row)
            print(describe(row, width, height), flush=True)
        if args.session:
            import temporal_session_overhead as tso

            row = tso.measure_session(
                backend, frames, args.warmup, options, args.compare, _median_ms
            )
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
