"""What a fresh process waits for: the cold-start benchmark of the cuda backend.

`run_cold` starts new Python processes, each with an empty home folder and an
empty Triton cache (as on a new machine, a farm node or a container), that run
the script a user would write: import torch (CUDA init), import oidn_gpu, make
the images, denoise twice, then denoise at a second size. Each child reports its
times as one JSON line (`child_main`); the parent adds the wall time from spawn
to exit. ``warm=True`` runs a second child with the same home and cache (what a
user's next script waits for). Intel OIDN (pyoidn) runs the same script on its
CUDA device when it is installed, beside ours.

The command line of ``oidn-gpu bench --backend cuda --cold`` (`cli.bench`).
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

# Rows of the report, in order: (key, label).
ROWS = (
    ("first_image_s", "process start to first image"),
    ("import_torch_s", "import torch + CUDA init"),
    ("import_s", "import the denoiser"),
    ("first_denoise_s", "first denoise"),
    ("second_denoise_s", "second denoise"),
    ("new_size_first_s", "first denoise at the second size"),
    ("new_size_second_s", "second denoise at the second size"),
    ("script_wall_s", "script wall (spawn to exit)"),
)
CHILD_TIMEOUT_S = 600
FLOAT3 = 3  # OIDN_FORMAT_FLOAT3 (oidn.h, OIDN 2.x)
# What a fresh process runs: this file as __main__ (not ``-m``, which would import the
# oidn_gpu package before the child could time it).
CHILD_BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


@dataclass
class ColdResult:
    """Medians over the runs of each kind (``ours``, ``ours_warm``, ``oidn``)."""

    size: tuple[int, int]
    second_size: tuple[int, int]
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def medians(self, kind: str) -> dict[str, float]:
        rows = self.runs.get(kind, [])
        return {key: statistics.median(r[key] for r in rows) for key, _ in ROWS if rows}

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "second_size": self.second_size,
            "runs": self.runs,
            "medians": {kind: self.medians(kind) for kind in self.runs},
            "notes": self.notes,
        }

    def table(self) -> str:
        kinds = [k for k in ("intel_oidn", "ours", "ours_warm") if self.runs.get(k)]
        titles = {
            "intel_oidn": "Intel OIDN",
            "ours": "oidn-gpu",
            "ours_warm": "oidn-gpu, caches warm",
        }
        medians = {k: self.medians(k) for k in kinds}
        (h, w), (h2, w2) = self.size, self.second_size
        lines = [
            f"cold start, {w}x{h} then {w2}x{h2}; medians of "
            + ", ".join(f"{len(self.runs[k])} {titles[k]}" for k in kinds)
            + " run(s); seconds",
            f"{'':<36}" + "".join(f"{titles[k]:>24}" for k in kinds),
        ]
        for key, label in ROWS:
            lines.append(f"{label:<36}" + "".join(f"{medians[k][key]:>24.3f}" for k in kinds))
        lines += self.notes
        return "\n".join(lines)


def _child_env(home: str, cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=home, TRITON_CACHE_DIR=cache, PYTHONUNBUFFERED="1")
    env.pop("OIDN_GPU_CUDA_TUNING", None)  # what a user gets: the shipped tiles
    return env


def _spawn(kind: str, backend: str, size: tuple[int, int], second: tuple[int, int], home: str,
           cache: str) -> dict[str, float]:  # fmt: skip
    # The child runs this file as a script, so that its `import oidn_gpu` is timed.
    argv = [sys.executable, "-c", CHILD_BOOT, __file__, kind, backend, f"{size[0]}x{size[1]}",
            f"{second[0]}x{second[1]}"]  # fmt: skip
    start = time.time()
    done = subprocess.run(
        argv, env=_child_env(home, cache), capture_output=True, text=True,
        timeout=CHILD_TIMEOUT_S, check=False,
    )  # fmt: skip
    wall = time.time() - start
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"the {kind} cold-start child failed: {' | '.join(tail)}")
    times = json.loads(lines[-1])
    if "unavailable" in times:
        raise LookupError(times["unavailable"])
    times["first_image_s"] = times.pop("first_image_at") - start
    times["script_wall_s"] = wall
    return times


def run_cold(
    backend: str,
    size: tuple[int, int] = (1080, 1920),
    second_size: tuple[int, int] = (750, 1000),
    *,
    runs: int = 3,
    warm: bool = True,
    oidn: bool = True,
    progress: Any = None,
) -> ColdResult:
    """Cold-start times of ``runs`` fresh processes (``size`` then ``second_size``) of
    ``backend``'s HDR colour + albedo + normal denoise (``rt_hdr_alb_nrm``, quality high)."""
    result = ColdResult(size, second_size)
    kinds = (["intel_oidn"] if oidn else []) + ["ours"]
    for index in range(runs):
        for kind in list(kinds):
            with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cache:
                try:
                    times = _spawn(kind, backend, size, second_size, home, cache)
                except LookupError as missing:
                    result.notes.append(f"Intel OIDN not run: {missing}")
                    kinds.remove(kind)
                    continue
                result.runs.setdefault(kind, []).append(times)
                if kind == "ours" and warm:
                    again = _spawn(kind, backend, size, second_size, home, cache)
                    result.runs.setdefault("ours_warm", []).append(again)
            if progress is not None:
                progress(f"run {index + 1}/{runs} {kind} done")
    return result


# ----------------------------------------------------------------------------- the child


def _images(np: Any, height: int, width: int, rng: Any) -> tuple[Any, Any, Any]:
    color = (rng.random((height, width, 3), dtype=np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((height, width, 3), dtype=np.float32)
    normal = rng.random((height, width, 3), dtype=np.float32) * 2 - 1
    return color, albedo, normal


def _ours(np: Any, backend: str, size: tuple[int, int], second: tuple[int, int],
          times: dict[str, float]) -> None:  # fmt: skip
    start = time.perf_counter()
    import oidn_gpu

    times["import_s"] = time.perf_counter() - start
    first = _images(np, *size, np.random.default_rng(1))
    other = _images(np, *second, np.random.default_rng(2))
    den = oidn_gpu.Denoiser(hdr=True, backend=backend)  # rt_hdr_alb_nrm, quality high
    _timed(times, "first_denoise_s", lambda: den.denoise(*first))
    times["first_image_at"] = time.time()
    _timed(times, "second_denoise_s", lambda: den.denoise(*first))
    _timed(times, "new_size_first_s", lambda: den.denoise(*other))
    _timed(times, "new_size_second_s", lambda: den.denoise(*other))
    info = den.info()
    times["engine_last"] = info.device if info is not None else ""  # type: ignore[assignment]
    den.close()


def _oidn(np: Any, size: tuple[int, int], second: tuple[int, int],
          times: dict[str, float]) -> None:  # fmt: skip
    start = time.perf_counter()
    try:
        import pyoidn
    except ImportError:
        print(json.dumps({"unavailable": "pyoidn is not installed"}))
        sys.exit(0)
    times["import_s"] = time.perf_counter() - start
    first = _images(np, *size, np.random.default_rng(1))
    other = _images(np, *second, np.random.default_rng(2))
    # OIDNDeviceType: OIDN_DEVICE_TYPE_CUDA is 3 (oidn.h, OIDN 2.x)
    device = pyoidn.Device(getattr(pyoidn, "OIDN_DEVICE_TYPE_CUDA", 3))
    device.commit()
    if device.get_error() is not None:
        print(json.dumps({"unavailable": f"no OIDN CUDA device ({device.get_error()})"}))
        sys.exit(0)

    def denoise(images: tuple[Any, Any, Any]) -> None:
        # OIDN's set_image keeps a raw pointer: every array lives until execute returns.
        output = np.empty_like(images[0])
        flt = pyoidn.Filter(device, "RT")
        for name, array in zip(("color", "albedo", "normal"), images, strict=True):
            flt.set_image(name, array, FLOAT3)
        flt.set_image("output", output, FLOAT3)
        flt.set_bool("hdr", True)
        flt.commit()
        flt.execute()
        error = device.get_error()
        if error is not None:
            raise RuntimeError(error)

    try:
        _timed(times, "first_denoise_s", lambda: denoise(first))
    except RuntimeError as err:  # e.g. a CUDA device that cannot read host memory
        print(json.dumps({"unavailable": f"OIDN's CUDA device failed: {err}"}))
        sys.exit(0)
    times["first_image_at"] = time.time()
    _timed(times, "second_denoise_s", lambda: denoise(first))
    _timed(times, "new_size_first_s", lambda: denoise(other))
    _timed(times, "new_size_second_s", lambda: denoise(other))


def _timed(times: dict[str, float], key: str, fn: Any) -> None:
    start = time.perf_counter()
    fn()
    times[key] = time.perf_counter() - start


def child_main(argv: list[str]) -> None:
    """One fresh process: ``KIND HxW HxW``; prints its times as a JSON line."""
    kind, backend, size_text, second_text = argv
    size = tuple(int(v) for v in size_text.split("x"))
    second = tuple(int(v) for v in second_text.split("x"))
    times: dict[str, float] = {}
    start = time.perf_counter()
    import torch

    torch.zeros(1, device=torch.device(torch.cuda.current_device()))  # the CUDA context
    torch.cuda.synchronize()
    times["import_torch_s"] = time.perf_counter() - start
    import numpy as np

    if kind == "intel_oidn":
        _oidn(np, size, second, times)  # type: ignore[arg-type]
    else:
        _ours(np, backend, size, second, times)  # type: ignore[arg-type]
    print(json.dumps(times), flush=True)


if __name__ == "__main__":
    child_main(sys.argv[2:])  # argv: -c, this file, then the child's arguments
