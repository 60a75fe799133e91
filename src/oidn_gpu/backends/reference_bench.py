"""`oidn-gpu bench --backend reference`: time the NumPy reference backend on the CPU.

Two numbers per size, each the median (and p95) of ``runs`` wall-clock runs
after ``warmup`` runs: the network alone (`ReferenceExecutor.run` on the padded
network input) and the whole denoise (`Denoiser.denoise` on a random HDR
color+albedo+normal image: autoexposure, input processing, tiling, network,
output processing). The process's peak RSS is reported too. With ``--oidn``
Intel OIDN 2.5.1's CPU device (the ``pyoidn`` package) denoises the same image
with the same weights for comparison.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from oidn_gpu.backends.sizes import parse_size
from oidn_gpu.errors import InvalidArgumentError, OIDNGPUError
from oidn_gpu.files import write_bytes_atomic

ALIGNMENT = 16


@dataclass(frozen=True)
class ReferenceBench:
    """Measured wall-clock times (ms) of one size on the reference backend."""

    weights: str
    height: int
    width: int
    runs: int
    warmup: int
    network_ms: tuple[float, ...]
    denoise_ms: tuple[float, ...]
    network_median_ms: float
    network_p95_ms: float
    denoise_median_ms: float
    denoise_p95_ms: float
    peak_rss_mib: float
    oidn_median_ms: float | None = None

    def table(self) -> str:
        lines = [
            f"backend    reference (NumPy fp32), weights {self.weights}",
            f"size       {self.width}x{self.height}, {self.runs} runs after {self.warmup} warm-up",
            f"network    {self.network_median_ms:.0f} ms median, {self.network_p95_ms:.0f} ms p95",
            f"denoise    {self.denoise_median_ms:.0f} ms median, {self.denoise_p95_ms:.0f} ms p95",
            f"peak RSS   {self.peak_rss_mib:.0f} MiB",
        ]
        if self.oidn_median_ms is not None:
            ratio = self.denoise_median_ms / self.oidn_median_ms
            lines.append(
                f"Intel OIDN {self.oidn_median_ms:.0f} ms median (CPU device); "
                f"reference is {ratio:.1f}x"
            )
        return "\n".join(lines)


def _times(fn: Callable[[], object], runs: int, warmup: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _p95(values: Sequence[float]) -> float:
    return float(np.percentile(values, 95))


def run_reference_bench(
    *, size: str = "1080p", weights: str = "rt_hdr_alb_nrm", runs: int = 5, warmup: int = 1,
    oidn: bool = False,
) -> ReferenceBench:
    """Benchmark the reference backend; see the module docstring."""
    from oidn_gpu.backends.reference import ReferenceExecutor
    from oidn_gpu.filter import Denoiser
    from oidn_gpu.model import weights as builtin

    if runs < 1 or warmup < 0:
        raise InvalidArgumentError(f"runs must be >= 1 and warmup >= 0, got {runs} and {warmup}")
    height, width = parse_size(size)
    model = builtin.load_builtin(weights)
    if model.input_channels != 9:
        raise InvalidArgumentError(
            f"the benchmark uses color+albedo+normal weights; '{weights}' takes "
            f"{model.input_channels} channels"
        )
    rng = np.random.default_rng(0)
    color = (rng.random((height, width, 3), np.float32) * 4).astype(np.float32)
    albedo = rng.random((height, width, 3), np.float32)
    normal = rng.random((height, width, 3), np.float32) * 2 - 1
    net_h, net_w = -(-height // ALIGNMENT) * ALIGNMENT, -(-width // ALIGNMENT) * ALIGNMENT
    x = rng.random((9, net_h, net_w), np.float32)
    with ReferenceExecutor(model) as executor:
        network = _times(lambda: executor.run(x), runs, warmup)
    with Denoiser(hdr=True, weights=builtin.weights_path(weights), backend="reference") as den:
        denoise = _times(lambda: den.denoise(color, albedo, normal), runs, warmup)
    oidn_ms = None
    if oidn:
        oidn_ms = statistics.median(_time_oidn(weights, color, albedo, normal, runs, warmup))
    return ReferenceBench(
        weights=weights,
        height=height,
        width=width,
        runs=runs,
        warmup=warmup,
        network_ms=tuple(network),
        denoise_ms=tuple(denoise),
        network_median_ms=statistics.median(network),
        network_p95_ms=_p95(network),
        denoise_median_ms=statistics.median(denoise),
        denoise_p95_ms=_p95(denoise),
        peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        oidn_median_ms=oidn_ms,
    )


def _time_oidn(
    weights: str, color: np.ndarray, albedo: np.ndarray, normal: np.ndarray, runs: int,
    warmup: int,
) -> list[float]:
    """Intel OIDN's CPU device on the same images, weights chosen by OIDN (same file)."""
    from oidn_gpu.errors import require

    pyoidn = require("pyoidn", "dev")
    device = pyoidn.Device(pyoidn.OIDN_DEVICE_TYPE_CPU)
    device.commit()
    flt = pyoidn.Filter(device, pyoidn.OIDN_FILTER_TYPE_RT)
    output = np.empty_like(color)
    for name, image in (("color", color), ("albedo", albedo), ("normal", normal)):
        flt.set_image(getattr(pyoidn, f"OIDN_IMAGE_{name.upper()}"), image,
                      pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_image(pyoidn.OIDN_IMAGE_OUTPUT, output, pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_bool("hdr", True)
    flt.set_int("quality", 5 if weights == "rt_hdr_alb_nrm" else 4)  # balanced / fast
    flt.commit()
    times = _times(flt.execute, runs, warmup)
    flt.release()
    device.release()
    return times


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="oidn-gpu bench --backend reference",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument("--weights", default="rt_hdr_alb_nrm",
                        help="built-in color+albedo+normal weights name")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--oidn", action="store_true", help="also time Intel OIDN (pyoidn)")
    parser.add_argument("--json", dest="json_path", default=None, help="write the result as JSON")
    args = parser.parse_args(argv)
    try:
        result = run_reference_bench(size=args.size, weights=args.weights, runs=args.runs,
                                     warmup=args.warmup, oidn=args.oidn)
    except OIDNGPUError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2 if isinstance(err, InvalidArgumentError) else 1
    print(result.table())
    if args.json_path:
        write_bytes_atomic(args.json_path, json.dumps(asdict(result), indent=2).encode("utf-8"))
    return 0
