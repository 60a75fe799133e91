"""`bench/temporal_overhead.py`'s rows on a CUDA GPU (the cuda backend's temporal session).

Rows (medians over the frames after the warm-up):

* ``numpy``: host arrays in, a host array out: `oidn_gpu.Denoiser.denoise` against
  `oidn_gpu.TemporalDenoiser.denoise` (wall time);
* ``tensors``: torch CUDA tensors in, a CUDA tensor out: the denoiser's device path
  against `CudaTemporalSession.frame_on_device` (CUDA events);
* ``split``: the parts of the temporal frame's extra work: the staging and upload of
  motion and depth (wall time to a synchronized device), the four kernels (pack,
  reproject, light-change rejection, stabilize; CUDA events, back to back), and the
  readback of the history count (the one mid-frame sync);
* ``check``: the session's output against the host path of the same denoiser (NumPy
  passes, `HostTemporalSession`): relative L2 and largest absolute difference per frame.

The network's Triton kernels are compiled before anything is timed (the first frames of
a fresh process run on cuDNN while they compile).
"""

from __future__ import annotations

import statistics

import numpy as np
import torch

import oidn_gpu
from oidn_gpu import TemporalDenoiser
from oidn_gpu.backends.cuda import temporal_kernels as tk
from oidn_gpu.backends.host_temporal import HostTemporalSession
from oidn_gpu.temporal import passes as tp

COMPILE_TIMEOUT_S = 240


def _wait_compiled(den) -> None:
    """Wait for the network's background Triton compiles (the cuda runner's)."""
    for engine in den._engines.values():  # the benchmark looks inside the facade
        engine.runner.denoiser.wait_compiled(COMPILE_TIMEOUT_S)


def _event_ms(fn, items, warmup: int) -> float:
    times = []
    for index, item in enumerate(items):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(item)
        end.record()
        end.synchronize()
        if index >= warmup:
            times.append(start.elapsed_time(end))
    return statistics.median(times)


def _on_device(frames: list[dict]) -> list[dict]:
    keys = ("color", "albedo", "normal", "motion", "depth")
    return [{k: torch.from_numpy(np.ascontiguousarray(f[k])).cuda() for k in keys} for f in frames]


def _row(kind: str, per_frame: float, temporal: float) -> dict:
    row = {
        "backend": "cuda",
        "passes": "cuda",
        "inputs": kind,
        "per_frame_ms": per_frame,
        "temporal_ms": temporal,
        "overhead": temporal / per_frame - 1,
    }
    print(
        f"cuda      (cuda session, {kind} in and out): per-frame {per_frame:.2f} ms, "
        f"temporal {temporal:.2f} ms, overhead {100 * row['overhead']:.1f}%",
        flush=True,
    )
    return row


def measure(
    frames: list[dict], warmup: int, options: dict, check_frames: int, wall_ms, many_ms
) -> list[dict]:
    """The rows (see the module docstring), printed as they are measured; ``wall_ms`` and
    ``many_ms`` are `bench/temporal_overhead.py`'s medians (per call, between results)."""
    with oidn_gpu.Denoiser(hdr=True, backend="cuda", **options) as den:
        tensors = _on_device(frames)
        for f, t in zip(frames[:2], tensors[:2], strict=True):  # both paths, then compile
            den.denoise(f["color"], f["albedo"], f["normal"])
            den.denoise(t["color"], t["albedo"], t["normal"])
        _wait_compiled(den)
        rows = []
        per_frame = wall_ms(
            lambda f: den.denoise(f["color"], f["albedo"], f["normal"]), frames, warmup
        )
        with TemporalDenoiser(den) as td:
            temporal = wall_ms(lambda f: td.denoise(**f), frames, warmup)
            assert td.session.name == "cuda", td.session.name
            rows.append(_row("numpy", per_frame, temporal))
            session = td.session
            params = td.params.with_guides(depth=True, normal=False, albedo=False)
            per_frame_t = _event_ms(
                lambda t: den.denoise(t["color"], t["albedo"], t["normal"]), tensors, warmup
            )
            count = iter(range(len(tensors)))
            temporal_t = _event_ms(
                lambda t: session.frame_on_device(
                    t["color"],
                    t["albedo"],
                    t["normal"],
                    t["motion"],
                    t["depth"],
                    params,
                    restart=next(count) == 0,
                    copy=False,
                ),
                tensors,
                warmup,
            )
            rows.append(_row("tensors", per_frame_t, temporal_t))
            rows.append(_split(session, frames, tensors, params, warmup, wall_ms))
        rows.append(_many(den, frames, warmup, many_ms))
        if check_frames:
            rows.append(_check(den, frames[:check_frames]))
    return rows


def _many(den, frames: list[dict], warmup: int, many_ms) -> dict:
    """``denoise_many``: the temporal one stages the next frame during this one."""
    per_frame = many_ms(
        den.denoise_many((f["color"], f["albedo"], f["normal"]) for f in frames), warmup
    )
    with TemporalDenoiser(den) as td:
        temporal = many_ms(td.denoise_many(frames), warmup)
    return _row("numpy denoise_many", per_frame, temporal)


def _split(session, frames, tensors, params, warmup: int, wall_ms) -> dict:
    """The temporal frame's extra work in parts (session buffers of the last frame)."""
    buf = session._dev  # the benchmark times the session's own buffers
    scratch_state = torch.empty_like(buf["state"])  # the session's history stays as it is

    def upload(f):
        session._stage(session._slots[0], "motion", f["motion"])
        session._stage(session._slots[0], "depth", f["depth"])
        torch.cuda.synchronize()

    steps = {
        "pack": lambda t: tk.pack(
            t["color"], t["albedo"], t["normal"], t["depth"], buf["signal"], buf["guide_next"]
        ),
        "reproject": lambda t: tk.gather(
            t["motion"],
            buf["guide_next"],
            buf["guide"],
            buf["signal"],
            buf["state"],
            buf["repro"],
            buf["lum"],
            buf["kept"],
            params,
            has_history=True,
        ),
        "reject": lambda t: tk.reject(
            buf["signal"],
            buf["repro"],
            buf["lum"],
            buf["acc_color"],
            buf["acc_albedo"],
            buf["acc_normal"],
            params,
        ),
        "stabilize": lambda t: tk.stabilize(
            buf["acc_color"], buf["repro"], buf["out"], scratch_state, params
        ),
    }

    def count(_):
        buf["kept"].zero_()
        int(buf["kept"].item())

    row = {
        "backend": "cuda",
        "inputs": "split",
        "upload_motion_depth_ms": wall_ms(upload, frames, warmup),
        "count_readback_ms": wall_ms(count, frames, warmup),
    }
    for name, step in steps.items():
        row[f"{name}_ms"] = _event_ms(step, tensors, warmup)
    row["kernels_ms"] = sum(row[f"{name}_ms"] for name in steps)
    print(
        f"cuda      split: motion+depth staging and upload {row['upload_motion_depth_ms']:.3f}"
        f" ms, kernels {row['kernels_ms']:.3f} ms ("
        + ", ".join(f"{name} {row[f'{name}_ms']:.3f}" for name in steps)
        + f"), history count readback {row['count_readback_ms']:.3f} ms",
        flush=True,
    )
    return row


def _check(den, frames: list[dict]) -> dict:
    """The session against the host path (NumPy passes) on the same denoiser."""
    with TemporalDenoiser(den) as td:
        device = [td.denoise(**f) for f in frames]
    with TemporalDenoiser(den) as td:
        td.session.close()
        td.session = HostTemporalSession(den.frames, tp.NumpyTemporalPasses())
        host = [td.denoise(**f) for f in frames]
    pairs = list(zip(device, host, strict=True))
    rel = [float(np.linalg.norm(a - b) / np.linalg.norm(b)) for a, b in pairs]
    worst = [float(np.max(np.abs(a - b))) for a, b in pairs]
    finite = all(np.isfinite(a).all() for a in device)
    print(
        f"cuda      check against the host NumPy passes over {len(frames)} frames: rel. L2 "
        f"{', '.join(f'{r:.2e}' for r in rel)}; max abs {max(worst):.2e}; finite {finite}",
        flush=True,
    )
    return {"backend": "cuda", "inputs": "check", "rel_l2": rel, "max_abs": worst, "finite": finite}
