"""What a fresh process waits for: the cold-start benchmark of a GPU backend.

`run_cold` starts new Python processes, each with an empty home folder and empty
caches (as on a new machine, a farm node or a container): Triton's, and the GPU
drivers' shader caches under ``XDG_CACHE_HOME`` (Mesa's, NVIDIA's), so every
pipeline compiles. Each runs the script a user would write (`ColdScript`): import
torch and make its CUDA context first where the backend's users do
(``import_torch``), then import oidn_gpu, make the images (random HDR colour,
albedo and normal: ``rt_hdr_alb_nrm``), denoise twice, then denoise at a second
size. Each child reports its times as one JSON line (`child_main`), with where its
first denoise went when the backend logs its phases (records with ``phase`` and
``elapsed_ms`` at DEBUG level under the ``oidn_gpu`` logger, as the wgpu backend
logs opening the device, the kernels, the weights and each pipeline it compiles:
their count, the sum of their compile times and the span from the first compile's
start to the last one's end); the parent adds the wall time from spawn to exit.
``warm=True`` runs a second child with the same home and caches (what a user's next
script waits for). Intel OIDN (pyoidn) runs the same script beside ours when it is
installed, on the device the backend's benchmark names (``oidn_device``: CUDA, or
OIDN's default, the best device it has).

What ``oidn-gpu bench --backend NAME --cold`` runs (`cli.bench`,
`backends.benchmark.run_cold_start`).
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

# Rows of the report, in order: (key, label); a row no run has is left out.
ROWS = (
    ("first_image_s", "process start to first image"),
    ("import_torch_s", "import torch + CUDA init"),
    ("import_s", "import the denoiser"),
    ("first_denoise_s", "first denoise"),
    ("read_weights_s", "  in it: read the weights"),
    ("probe_s", "  in it: import wgpu, find a GPU adapter"),
    ("device_s", "  open the device"),
    ("kernels_s", "  choose and generate the kernels"),
    ("rendered", "  kernels rendered, not shipped (count)"),
    ("weights_s", "  pack and upload the weights"),
    ("network_s", "  in it: build the network"),
    ("triton_import_s", "  import Triton and the kernel modules"),
    ("loaded_s", "  load the compiled kernels"),
    ("launches_s", "  prepare the frame's launches"),
    ("pipelines", "  pipelines compiled (count)"),
    ("compile_sum_s", "  their compile times, summed"),
    ("compile_span_s", "  first compile start to last end"),
    ("second_denoise_s", "second denoise"),
    ("new_size_first_s", "first denoise at the second size"),
    ("new_size_second_s", "second denoise at the second size"),
    ("script_wall_s", "script wall (spawn to exit)"),
)
# Logged phases (`backends.phases`: the wgpu and cuda backends', the weights') -> their rows.
PHASE_ROWS = {
    "read the weights": "read_weights_s",
    "find a GPU adapter": "probe_s",
    "open the device": "device_s",
    "choose and generate the kernels": "kernels_s",
    "pack and upload the weights": "weights_s",
    "build the network": "network_s",
    "import Triton and the kernel modules": "triton_import_s",
    "load the compiled kernels": "loaded_s",
    "prepare the frame's launches": "launches_s",
}
COUNT_ROWS = ("pipelines", "rendered")  # counts, not seconds
# The driver caches a fresh process must not find (they would hold compiled pipelines).
DRIVER_CACHE_VARIABLES = (
    "__GL_SHADER_DISK_CACHE_PATH",
    "MESA_SHADER_CACHE_DIR",
    "MESA_GLSL_CACHE_DIR",
)
CHILD_TIMEOUT_S = 600
FLOAT3 = 3  # OIDN_FORMAT_FLOAT3 (oidn.h, OIDN 2.x)
OIDN_DEVICE_TYPES = {1: "CPU", 2: "SYCL", 3: "CUDA", 4: "HIP", 5: "Metal"}  # oidn.h, OIDN 2.x
# What a fresh process runs: this file as __main__ (not ``-m``, which would import the
# oidn_gpu package before the child could time it).
CHILD_BOOT = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"
NAMED_PACKAGES = 8  # how many packages without bytecode a note names (then a count)


@dataclass
class ColdResult:
    """Medians over the runs of each kind (``ours``, ``ours_warm``, ``oidn``)."""

    size: tuple[int, int]
    second_size: tuple[int, int]
    runs: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def medians(self, kind: str) -> dict[str, float]:
        rows = self.runs.get(kind, [])
        return {
            key: statistics.median(r[key] for r in rows)
            for key, _ in ROWS
            if rows and all(key in r for r in rows)
        }

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
        oidn_device = self.runs.get("intel_oidn", [{}])[0].get("device", "")
        titles = {
            "intel_oidn": f"Intel OIDN {oidn_device}".strip(),
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
            if any(key in medians[k] for k in kinds):
                cells = (_cell(medians[k].get(key), key) for k in kinds)
                lines.append(f"{label:<36}" + "".join(cells))
        lines += self.notes
        return "\n".join(lines)


def _cell(value: float | None, key: str) -> str:
    if value is None:
        return f"{'':>24}"
    return f"{value:>24.0f}" if key in COUNT_ROWS else f"{value:>24.3f}"


def _child_env(home: str, cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(HOME=home, TRITON_CACHE_DIR=cache, XDG_CACHE_HOME=cache, PYTHONUNBUFFERED="1")
    env.pop("OIDN_GPU_CUDA_TUNING", None)  # what a user gets: the shipped tiles
    for name in DRIVER_CACHE_VARIABLES:
        env.pop(name, None)
    return env


@dataclass(frozen=True)
class ColdScript:
    """What each fresh process runs: the backend, the two sizes, whether the user's script
    imports torch and makes its CUDA context first (``import_torch``), and the device of
    Intel OIDN beside ours (``oidn_device``: ``"cuda"``, or ``"default"``, the best it has)."""

    backend: str
    size: tuple[int, int]
    second_size: tuple[int, int]
    import_torch: bool = False
    oidn_device: str = "default"

    def argv(self, kind: str) -> list[str]:
        (h, w), (h2, w2) = self.size, self.second_size
        torch = "torch" if self.import_torch else "-"
        return [kind, self.backend, f"{h}x{w}", f"{h2}x{w2}", torch, self.oidn_device]

    @staticmethod
    def parse(argv: list[str]) -> tuple[str, ColdScript]:
        """``(kind, script)`` of a child's arguments (`argv`)."""
        kind, backend, size_text, second_text, torch, oidn_device = argv
        size, second = (tuple(int(v) for v in t.split("x")) for t in (size_text, second_text))
        return kind, ColdScript(backend, size, second, torch == "torch", oidn_device)  # type: ignore[arg-type]


def _spawn(kind: str, script: ColdScript, home: str, cache: str) -> dict[str, float]:
    # The child runs this file as a script, so that its `import oidn_gpu` is timed.
    argv = [sys.executable, "-c", CHILD_BOOT, __file__, *script.argv(kind)]
    start = time.time()
    done = subprocess.run(
        argv,
        env=_child_env(home, cache),
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
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
    import_torch: bool = False,
    oidn_device: str = "default",
    progress: Any = None,
) -> ColdResult:
    """Cold-start times of ``runs`` fresh processes (``size`` then ``second_size``) of
    ``backend``'s HDR colour + albedo + normal denoise (``rt_hdr_alb_nrm``, quality high);
    ``import_torch`` and ``oidn_device`` as `ColdScript` takes them."""
    script = ColdScript(backend, size, second_size, import_torch, oidn_device)
    result = ColdResult(size, second_size)
    kinds = (["intel_oidn"] if oidn else []) + ["ours"]
    for index in range(runs):
        for kind in list(kinds):
            with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as cache:
                try:
                    times = _spawn(kind, script, home, cache)
                except LookupError as missing:
                    result.notes.append(f"Intel OIDN not run: {missing}")
                    kinds.remove(kind)
                    continue
                _note_bytecode(result, times)
                result.runs.setdefault(kind, []).append(times)
                if kind == "ours" and warm:
                    again = _spawn(kind, script, home, cache)
                    _note_bytecode(result, again)
                    result.runs.setdefault("ours_warm", []).append(again)
            if progress is not None:
                progress(f"run {index + 1}/{runs} {kind} done")
    return result


def _note_bytecode(result: ColdResult, times: dict[str, Any]) -> None:
    """Move a child's ``no_bytecode`` list into one note of the result."""
    missing = times.pop("no_bytecode", None)
    if not missing:
        return
    named = ", ".join(missing[:NAMED_PACKAGES])
    more = len(missing) - NAMED_PACKAGES
    named += f" and {more} more" if more > 0 else ""
    note = (
        f"note: no compiled bytecode for {named} in this Python environment: "
        "each fresh process compiled their sources as it imported them (a pip install "
        "writes the bytecode; `python -m compileall` on site-packages does too)"
    )
    if note not in result.notes:
        result.notes.append(note)


# ----------------------------------------------------------------------------- the child


def images_of(np: Any, height: int, width: int, rng: Any) -> tuple[Any, Any, Any]:
    color = (rng.random((height, width, 3), dtype=np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((height, width, 3), dtype=np.float32)
    normal = rng.random((height, width, 3), dtype=np.float32) * 2 - 1
    return color, albedo, normal


def _ours(np: Any, script: ColdScript, times: dict[str, float]) -> None:
    start = time.perf_counter()
    import oidn_gpu

    times["import_s"] = time.perf_counter() - start
    first = images_of(np, *script.size, np.random.default_rng(1))
    other = images_of(np, *script.second_size, np.random.default_rng(2))
    den = oidn_gpu.Denoiser(hdr=True, backend=script.backend)  # rt_hdr_alb_nrm, quality high
    with _PhaseLog() as phases:
        _timed(times, "first_denoise_s", lambda: den.denoise(*first))
    times["first_image_at"] = time.time()
    times.update(phases.rows())
    _timed(times, "second_denoise_s", lambda: den.denoise(*first))
    _timed(times, "new_size_first_s", lambda: den.denoise(*other))
    _timed(times, "new_size_second_s", lambda: den.denoise(*other))
    info = den.info()
    times["engine_last"] = info.device if info is not None else ""  # type: ignore[assignment]
    den.close()


class _PhaseLog(logging.Handler):
    """The phases a backend logs (records with ``phase`` and ``elapsed_ms``) while in use."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._logger = logging.getLogger("oidn_gpu")

    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "phase") and hasattr(record, "elapsed_ms"):
            self.records.append(record)

    def __enter__(self) -> _PhaseLog:
        self._level = self._logger.level
        self._logger.setLevel(logging.DEBUG)
        self._logger.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)

    def rows(self) -> dict[str, float]:
        """Seconds per `PHASE_ROWS` phase, and the compiles' count, sum and span."""
        rows: dict[str, float] = {}
        compiles: list[tuple[float, float]] = []  # (start, end), wall-clock seconds
        rendered = 0  # WGSL kernels rendered from the templates (not found shipped)
        for record in self.records:
            seconds = float(record.elapsed_ms) / 1e3  # type: ignore[attr-defined]
            phase = record.phase  # type: ignore[attr-defined]
            if phase == "render":
                rendered += 1
            elif phase == "compile":
                compiles.append((record.created - seconds, record.created))
            elif phase in PHASE_ROWS:
                rows[PHASE_ROWS[phase]] = rows.get(PHASE_ROWS[phase], 0.0) + seconds
        if compiles:  # a WGSL backend's
            rows["rendered"] = rendered
            rows["pipelines"] = len(compiles)
            rows["compile_sum_s"] = sum(end - begin for begin, end in compiles)
            rows["compile_span_s"] = max(e for _, e in compiles) - min(b for b, _ in compiles)
        return rows


def _oidn(np: Any, script: ColdScript, times: dict[str, float]) -> None:
    start = time.perf_counter()
    try:
        import pyoidn
    except ImportError:
        print(json.dumps({"unavailable": "pyoidn is not installed"}))
        sys.exit(0)
    times["import_s"] = time.perf_counter() - start
    first = images_of(np, *script.size, np.random.default_rng(1))
    other = images_of(np, *script.second_size, np.random.default_rng(2))
    # OIDNDeviceType (oidn.h, OIDN 2.x): DEFAULT 0 (the best there is), then OIDN_DEVICE_TYPES
    wanted = {n.lower(): t for t, n in OIDN_DEVICE_TYPES.items()}.get(script.oidn_device, 0)
    device = pyoidn.Device(wanted)
    device.commit()
    if device.get_error() is not None:
        print(
            json.dumps({"unavailable": f"no OIDN device of type {wanted} ({device.get_error()})"})
        )
        sys.exit(0)
    times["device"] = OIDN_DEVICE_TYPES.get(device.get_int("type"), "")  # type: ignore[assignment]

    denoise = OidnFrames(np, pyoidn, device)
    try:
        _timed(times, "first_denoise_s", lambda: denoise(first))  # with its filter's commit
    except RuntimeError as err:  # e.g. a CUDA device that cannot read host memory
        print(json.dumps({"unavailable": f"OIDN's device failed: {err}"}))
        sys.exit(0)
    times["first_image_at"] = time.time()
    _timed(times, "second_denoise_s", lambda: denoise(first))
    _timed(times, "new_size_first_s", lambda: denoise(other))
    _timed(times, "new_size_second_s", lambda: denoise(other))


class OidnFrames:
    """Intel OIDN's RT filter on its device, NumPy in and out through the device's own
    buffers (a CUDA device cannot read host arrays): one filter and buffer set per size,
    committed on its first frame, as an application that denoises a sequence keeps them."""

    def __init__(self, np: Any, pyoidn: Any, device: Any) -> None:
        self.np, self.pyoidn, self.device = np, pyoidn, device
        self.filters: dict[tuple[int, ...], tuple[Any, list[Any]]] = {}

    def __call__(self, images: tuple[Any, Any, Any]) -> Any:
        pyoidn = self.pyoidn
        shape = images[0].shape
        height, width = shape[:2]
        nbytes = images[0].nbytes
        if shape not in self.filters:
            storage = getattr(pyoidn, "OIDN_STORAGE_DEVICE", 2)  # OIDNStorage (oidn.h)
            buffers = [pyoidn.Buffer(self.device, nbytes, storage=storage) for _ in range(4)]
            flt = pyoidn.Filter(self.device, "RT")
            for name, buffer in zip(("color", "albedo", "normal", "output"), buffers, strict=True):
                flt.set_image(name, buffer, FLOAT3, width, height)
            flt.set_bool("hdr", True)
            flt.commit()
            self.filters[shape] = (flt, buffers)
        flt, buffers = self.filters[shape]
        for buffer, image in zip(buffers[:3], images, strict=True):
            buffer.write(0, nbytes, image)
        flt.execute()
        output = self.np.empty_like(images[0])
        buffers[3].read(0, nbytes, output)
        error = self.device.get_error()
        if error is not None:
            raise RuntimeError(error)
        return output


def _timed(times: dict[str, float], key: str, fn: Any) -> None:
    start = time.perf_counter()
    fn()
    times[key] = time.perf_counter() - start


def child_main(argv: list[str]) -> None:
    """One fresh process: the arguments of `ColdScript.argv`; prints its times as a JSON
    line."""
    kind, script = ColdScript.parse(argv)
    times: dict[str, float] = {}
    if script.import_torch:
        start = time.perf_counter()
        import torch

        torch.zeros(1, device=torch.device(torch.cuda.current_device()))  # the CUDA context
        torch.cuda.synchronize()
        times["import_torch_s"] = time.perf_counter() - start
    import numpy as np

    if kind == "intel_oidn":
        _oidn(np, script, times)
    else:
        _ours(np, script, times)
    times["no_bytecode"] = without_bytecode(sys.modules)  # type: ignore[assignment]
    print(json.dumps(times), flush=True)


def without_bytecode(modules: dict[str, Any]) -> list[str]:
    """The top-level packages and modules among ``modules`` (a process's `sys.modules`)
    loaded from a source file with no cached bytecode beside it (``__pycache__``): what a
    fresh process compiled as it imported them (a pip install writes the bytecode)."""
    import importlib.util

    missing = []
    for name in sorted(n for n in modules if "." not in n):
        origin = getattr(modules.get(name), "__file__", None)
        if not origin or not origin.endswith(".py"):
            continue
        if not os.path.exists(importlib.util.cache_from_source(origin)):
            missing.append(name)
    return missing


if __name__ == "__main__":
    child_main(sys.argv[2:])  # argv: -c, this file, then the child's arguments
