"""The cuda benchmark's public-API rows (``oidn-gpu bench --backend cuda``): what a user's
call costs, beside the pipeline's numbers of `backends.cuda.bench`.

Wall milliseconds per call, medians, until the GPU is idle
(`torch.cuda.synchronize` after each call), on random HDR colour, albedo and
normal images of the benchmark's size:

- ``denoiser_tensors_same``: `Denoiser.denoise` on the same torch CUDA tensors
  every call (a render loop that reuses its buffers);
- ``denoiser_tensors_fresh``: the same with new tensors every call (more sets than
  the denoiser keeps captured frames, so no call finds its tensors' addresses);
- ``denoiser_numpy``: `Denoiser.denoise` on NumPy arrays;
- ``one_call_numpy``: `oidn_gpu.denoise` on NumPy arrays, one call per image (its
  cache of warm denoisers serves every call after the first).
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

import oidn_gpu
from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.filter import CUSTOM_WEIGHTS
from oidn_gpu.model.weights import weights_path

# More tensor sets than the cuda backend keeps captured frames (its GRAPH_CACHE_SIZE, 4),
# so that no call finds its own tensors' addresses captured.
FRESH_SETS = 8

# Rows of `api_rows`, with what each measures (for the table).
ROWS = {
    "denoiser_tensors_same": "Denoiser.denoise on torch CUDA tensors (the same each call)",
    "denoiser_tensors_fresh": "Denoiser.denoise on torch CUDA tensors (fresh each call)",
    "denoiser_numpy": "Denoiser.denoise on NumPy arrays",
    "one_call_numpy": "oidn_gpu.denoise on NumPy arrays, one call per image",
}


def _median_wall_ms(torch: Any, fn: Any, runs: int, warmup: int) -> float:
    def idle() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    for _ in range(warmup):
        fn()
    idle()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        idle()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _check_same_image(torch: Any, image: Any, expected: Any, engine: str) -> None:
    """A copy of the tensors gives the same bits on Triton; cuDNN picks algorithms whose
    sums differ in order from call to call (seen on an H200: docs/benchmarks.md),
    so there the image agrees to fp16 rounding."""
    if "cudnn" not in engine:
        same = torch.equal(image, expected)
    else:
        diff = torch.linalg.vector_norm((image - expected).double())
        same = bool(diff <= 1e-3 * torch.linalg.vector_norm(expected.double()))
    if not same:
        raise OIDNGPUError(
            f"Denoiser.denoise gave another image for a copy of its tensors ({engine})"
        )


def _until_triton_serves(den: Any, images: list[Any], limit_s: float = 300.0) -> None:
    """Denoise until the cuDNN bridge has handed over to Triton (the rows are the warm
    speed; `oidn-gpu bench --cold` measures the first frames)."""
    start = time.perf_counter()
    den.denoise(*images)
    while "while Triton compiles" in den.info().device:
        if time.perf_counter() - start > limit_s:
            raise OIDNGPUError(f"the Triton kernels were not ready after {limit_s:.0f} s")
        time.sleep(0.05)
        den.denoise(*images)


def api_rows(
    *,
    backend: str,
    size: tuple[int, int],
    weights: str | Path,
    precision: str,
    engine: str,
    runs: int,
    host_runs: int,
    warmup: int,
) -> dict[str, float]:
    """Median wall ms per call of each row of `ROWS` (see the module docstring) of
    ``backend`` (one that takes torch tensors), on the current CUDA device (on the CPU
    where there is none: tests)."""
    import torch  # the tensor rows' dependency: only when such a benchmark runs

    path = Path(weights)
    if not (path.suffix == ".tza" or path.exists()):
        path = weights_path(str(weights))
    options = {
        "hdr": True,
        "backend": backend,
        "precision": precision,
        "engine": engine,
        "weights": str(path),
    }
    height, width = size
    rng = np.random.default_rng(20261201)
    host = [
        (rng.random((height, width, 3)) * 4).astype(np.float32),
        rng.random((height, width, 3)).astype(np.float32),
        (rng.random((height, width, 3)) * 2 - 1).astype(np.float32),
    ]
    with oidn_gpu.Denoiser(**options) as den:
        channels = den._models._models[CUSTOM_WEIGHTS].input_channels // 3
        host = host[:channels]
        device = torch.device(torch.cuda.current_device() if torch.cuda.is_available() else "cpu")
        same = [torch.from_numpy(a).to(device) for a in host]
        sets = [[t.clone() for t in same] for _ in range(FRESH_SETS)]
        turn = iter(range(1 << 62))
        _until_triton_serves(den, same)
        expected = den.denoise(*same)
        rows = {
            "denoiser_tensors_same": _median_wall_ms(
                torch, lambda: den.denoise(*same), runs, warmup
            ),
            "denoiser_tensors_fresh": _median_wall_ms(
                torch, lambda: den.denoise(*sets[next(turn) % len(sets)]), runs, warmup
            ),
        }
        # NumPy images are another kernel configuration than device tensors: warm it too.
        _until_triton_serves(den, host)
        rows["denoiser_numpy"] = _median_wall_ms(torch, lambda: den.denoise(*host), host_runs, 3)
        _check_same_image(torch, den.denoise(*sets[0]), expected, den.info().device)
    rows["one_call_numpy"] = _median_wall_ms(
        torch, lambda: oidn_gpu.denoise(*host, **options), host_runs, 3
    )
    oidn_gpu.clear_denoiser_cache()
    return rows
