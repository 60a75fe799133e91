"""What a fresh process waits for over a whole sequence: the cold-sequence rows of ``bench --cold``.

A farm task or a script starts a new process and denoises a shot: `run_cold_sequences`
starts fresh Python processes (an empty home folder, so empty Triton and oidn-gpu
caches: a new farm node or container) that import torch, make four distinct 1080p
frames (HDR colour + albedo + normal, ``rt_hdr_alb_nrm``) and denoise N frames one
after another, NumPy in and out, each timed from the call to the returned array,
with the engine that served it (`Denoiser.info`). Intel OIDN (pyoidn, CUDA device,
its own device buffers) runs the same loop beside it when installed.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from oidn_gpu.cli.bench_cold import OidnFrames, images_of
from oidn_gpu.filter import Denoiser

CHILD_TIMEOUT_S = 900
CHILD_BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
TITLES = {"intel_oidn": "Intel OIDN (pyoidn)", "ours": "oidn-gpu"}


@dataclass
class SequenceResult:
    """Per kind (``oidn``, ``ours``) and frame count, each fresh process's report."""

    size: tuple[int, int]
    runs: dict[str, dict[int, list[dict[str, Any]]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def summary(self, kind: str, frames: int) -> dict[str, Any] | None:
        reports = self.runs.get(kind, {}).get(frames)
        if not reports:
            return None
        totals = [sum(r["frame_ms"]) / 1000 for r in reports]
        return {
            "total_s": statistics.median(totals),
            "first_s": statistics.median(r["frame_ms"][0] / 1000 for r in reports),
            "last_half_ms": statistics.median(
                statistics.median(r["frame_ms"][frames // 2 :]) for r in reports
            ),
            "engines": reports[len(reports) // 2]["engines"],
        }

    def to_dict(self) -> dict[str, Any]:
        frames = sorted({n for by in self.runs.values() for n in by})
        return {
            "size": self.size,
            "runs": {k: {str(n): v for n, v in by.items()} for k, by in self.runs.items()},
            "summary": {k: {str(n): self.summary(k, n) for n in frames} for k in self.runs},
            "notes": self.notes,
        }

    def table(self) -> str:
        height, width = self.size
        kinds = [k for k in ("intel_oidn", "ours") if self.runs.get(k)]
        frames = sorted({n for by in self.runs.values() for n in by})
        lines = [f"cold sequences, {width}x{height}, NumPy in and out; medians of fresh processes"]
        for n in frames:
            rows = {k: self.summary(k, n) for k in kinds}
            for label, key, unit in (
                ("frame time, total", "total_s", "s"),
                ("first frame", "first_s", "s"),
                ("a frame, second half (median)", "last_half_ms", "ms"),
            ):
                cells = "".join(
                    f"{TITLES[k]:>22}: {rows[k][key]:8.3f} {unit}" for k in kinds if rows[k]
                )
                lines.append(f"{n} frames, {label:<30}{cells}")
            if rows.get("intel_oidn") and rows.get("ours"):
                ratio = rows["ours"]["total_s"] / rows["intel_oidn"]["total_s"]
                lines.append(f"{n} frames, oidn-gpu / Intel OIDN total: {ratio:.2f}")
            if rows.get("ours"):
                served = ", ".join(f"{e} x{c}" for e, c in rows["ours"]["engines"])
                lines.append(f"{n} frames, oidn-gpu engines in order: {served}")
        return "\n".join(lines + self.notes)


def run_cold_sequences(
    backend: str,
    size: tuple[int, int] = (1080, 1920),
    frames: tuple[int, ...] = (100, 400),
    *,
    runs: int = 1,
    oidn: bool = True,
    progress: Any = None,
) -> SequenceResult:
    """``runs`` fresh processes per kind and frame count (see the module docstring)."""
    result = SequenceResult(size)
    kinds = (["intel_oidn"] if oidn else []) + ["ours"]
    for count in frames:
        for index in range(runs):
            for kind in list(kinds):
                try:
                    report = _spawn(kind, backend, size, count)
                except LookupError as missing:
                    result.notes.append(f"Intel OIDN not run: {missing}")
                    kinds.remove(kind)
                    continue
                result.runs.setdefault(kind, {}).setdefault(count, []).append(report)
                if progress is not None:
                    progress(f"{count} frames, run {index + 1}/{runs}, {kind} done")
    return result


def _spawn(kind: str, backend: str, size: tuple[int, int], frames: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "HOME": home, "PYTHONUNBUFFERED": "1"}
        for name in ("TRITON_CACHE_DIR", "XDG_CACHE_HOME", "OIDN_GPU_CACHE_DIR"):
            env.pop(name, None)  # a new node: every cache under the empty home
        env.pop("OIDN_GPU_CUDA_TUNING", None)
        argv = [
            sys.executable,
            "-c",
            CHILD_BOOT,
            __file__,
            kind,
            backend,
            f"{size[0]}x{size[1]}",
            str(frames),
        ]
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the {kind} sequence child failed: {' | '.join(tail)}")
    report = json.loads(lines[-1])
    if "unavailable" in report:
        raise LookupError(report["unavailable"])
    return report


# ----------------------------------------------------------------------------- the child


def _runs_of(names: list[str]) -> list[list[Any]]:
    """``["a", "a", "b"]`` -> ``[["a", 2], ["b", 1]]``."""
    runs: list[list[Any]] = []
    for name in names:
        if runs and runs[-1][0] == name:
            runs[-1][1] += 1
        else:
            runs.append([name, 1])
    return runs


def child_main(argv: list[str]) -> None:
    """One fresh process: ``KIND BACKEND HxW FRAMES``; prints its report as a JSON line."""
    kind, backend, size_text, count_text = argv
    height, width = (int(v) for v in size_text.split("x"))
    start = time.perf_counter()
    import torch

    torch.zeros(1, device=torch.device(torch.cuda.current_device()))  # the CUDA context
    torch.cuda.synchronize()
    report: dict[str, Any] = {"import_torch_s": time.perf_counter() - start}
    import numpy as np

    frames = [images_of(np, height, width, np.random.default_rng(i)) for i in range(4)]
    if kind == "intel_oidn":
        denoise, engine = _oidn_loop(np)
    else:
        den = Denoiser(hdr=True, backend=backend)  # rt_hdr_alb_nrm, quality high
        denoise = lambda images: den.denoise(*images)  # noqa: E731
        engine = lambda: den.info().device  # noqa: E731
    times, engines = [], []
    for index in range(int(count_text)):
        begin = time.perf_counter()
        denoise(frames[index % len(frames)])
        times.append((time.perf_counter() - begin) * 1000)
        engines.append(engine())
    report.update(frame_ms=times, engines=_runs_of(engines))
    print(json.dumps(report), flush=True)


def _oidn_loop(np: Any) -> tuple[Any, Any]:
    try:
        import pyoidn
    except ImportError:
        print(json.dumps({"unavailable": "pyoidn is not installed"}))
        sys.exit(0)
    device = pyoidn.Device(getattr(pyoidn, "OIDN_DEVICE_TYPE_CUDA", 3))  # oidn.h, OIDN 2.x
    device.commit()
    if device.get_error() is not None:
        print(json.dumps({"unavailable": f"no OIDN CUDA device ({device.get_error()})"}))
        sys.exit(0)
    return OidnFrames(np, pyoidn, device), lambda: "Intel OIDN CUDA"


if __name__ == "__main__":
    child_main(sys.argv[2:])  # argv: -c, this file, then the child's arguments
