"""The oidn benchmark (``oidn-gpu bench --backend oidn``): `Denoiser` against pyoidn.

Per size, ``Denoiser(backend="oidn").denoise`` (lent by the command line) and a direct
Intel OIDN call through pyoidn's own API (one committed filter, executed again each
run; on OIDN's GPU devices the images are written into OIDN buffers in device memory
and the result read back in each run, as the backend does) denoise the same random HDR
color + albedo + normal image with the same weights (``rt_hdr_alb_nrm`` by default,
quality high) on the same kind of OIDN device, turn about in one process (so both see
the same load on a shared machine), and the medians of their wall-clock runs are
printed with their ratio and whether the two images are equal bit for bit.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.bench_result import JSON_HELP, parse_size, write_bench_json
from oidn_gpu.backends.benchmark import BenchTools
from oidn_gpu.backends.oidn.devices import DEVICE_TYPES, device_kind, parse_device
from oidn_gpu.errors import require

BACKEND = "oidn"
DEFAULT_SIZES = "512x512,1080p"
IMAGES_RNG_STATE = 7  # where the images' random generator starts: both paths get the same images


@dataclass(frozen=True)
class OidnBenchRow:
    """One size: the medians (ms) of both paths and their ratio."""

    width: int
    height: int
    runs: int
    denoiser_ms: tuple[float, ...]
    pyoidn_ms: tuple[float, ...]
    denoiser_median_ms: float
    pyoidn_median_ms: float
    ratio: float
    identical: bool
    device: str


def _images(height: int, width: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(IMAGES_RNG_STATE)
    color = (rng.random((height, width, 3), np.float32) ** 3 * 8).astype(np.float32)
    albedo = rng.random((height, width, 3), np.float32)
    normal = (rng.random((height, width, 3), np.float32) * 2 - 1).astype(np.float32)
    return color, albedo, normal


@contextmanager
def _pyoidn_filter(
    images: tuple[np.ndarray, ...],
    device: str | None,
    output: np.ndarray,
    device_buffers: bool | None = None,
) -> Iterator[Callable[[], None]]:
    """A committed pyoidn RT filter of the images (HDR, quality high) on ``device``'s
    kind; yields a call that denoises them into ``output``.

    On OIDN's CPU device the filter reads and writes the arrays where they are; on its GPU
    devices (or with ``device_buffers``) each call writes the images into OIDN buffers in
    the device's memory, runs the filter and reads the result back, as an application
    that denoises host images on a GPU does (a CUDA device that cannot read host memory
    refuses host arrays).
    """
    pyoidn = require("pyoidn", BACKEND)
    oidn_device = pyoidn.Device(DEVICE_TYPES[device_kind(device)])
    oidn_device.commit()
    if device_buffers is None:
        device_buffers = oidn_device.get_int("type") != DEVICE_TYPES["cpu"]
    flt = pyoidn.Filter(oidn_device, pyoidn.OIDN_FILTER_TYPE_RT)
    arrays = (*images, output)
    buffers = [
        pyoidn.Buffer(oidn_device, a.nbytes, storage=pyoidn.OIDN_STORAGE_DEVICE)
        for a in (arrays if device_buffers else ())
    ]
    height, width = output.shape[:2]
    for index, name in enumerate(("color", "albedo", "normal", pyoidn.OIDN_IMAGE_OUTPUT)):
        if device_buffers:
            flt.set_image(name, buffers[index], pyoidn.OIDN_FORMAT_FLOAT3, width, height)
        else:
            flt.set_image(name, arrays[index], pyoidn.OIDN_FORMAT_FLOAT3)
    flt.set_bool("hdr", True)
    flt.commit()

    def denoise() -> None:
        if buffers:
            for buffer, image in zip(buffers[:-1], images, strict=True):
                buffer.write(0, image.nbytes, image)
        flt.execute()
        if buffers:
            buffers[-1].read(0, output.nbytes, output)

    try:
        yield denoise
        error = oidn_device.get_error()
        if error is not None:
            raise RuntimeError(f"pyoidn: {error}")
    finally:
        flt.release()
        for buffer in buffers:
            buffer.release()
        oidn_device.release()


def run_size(
    denoiser: Callable[..., Any], size: str, runs: int, warmup: int, device: str | None
) -> OidnBenchRow:
    """Both paths at one size, alternating (see the module docstring)."""
    height, width = parse_size(size)
    images = _images(height, width)
    expected = np.empty_like(images[0])
    times: dict[str, list[float]] = {"denoiser": [], "pyoidn": []}
    with (
        denoiser(backend=BACKEND, hdr=True, device=device) as den,
        _pyoidn_filter(images, device, expected) as execute,
    ):
        for index in range(warmup + runs):
            start = time.perf_counter()
            ours = den.denoise(*images)
            middle = time.perf_counter()
            execute()
            end = time.perf_counter()
            if index >= warmup:
                times["denoiser"].append((middle - start) * 1e3)
                times["pyoidn"].append((end - middle) * 1e3)
        where = den.info().device
    ours_ms, oidn_ms = statistics.median(times["denoiser"]), statistics.median(times["pyoidn"])
    return OidnBenchRow(
        width,
        height,
        runs,
        tuple(times["denoiser"]),
        tuple(times["pyoidn"]),
        ours_ms,
        oidn_ms,
        ours_ms / oidn_ms,
        bool(np.array_equal(ours, expected)),
        where,
    )


def table(rows: list[OidnBenchRow]) -> str:
    lines = [
        "size        Denoiser(backend='oidn')  direct pyoidn  ratio  same image",
    ]
    for r in rows:
        size = f"{r.width}x{r.height}"
        same = "yes" if r.identical else "NO"
        lines.append(
            f"{size:<11} {r.denoiser_median_ms:>21.1f} ms {r.pyoidn_median_ms:>10.1f} ms "
            f"{r.ratio:>6.3f}x  {same}"
        )
    if rows:
        lines.append(f"device: {rows[0].device}; medians of {rows[0].runs} runs each, alternating")
    return "\n".join(lines)


class OidnBenchmark:
    """The `Benchmark` of the oidn backend: `run_size` per size and the table."""

    description = "Time Denoiser(backend='oidn') against a direct Intel OIDN call (pyoidn)."
    default = False

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--sizes",
            default=DEFAULT_SIZES,
            help=f"comma-separated sizes (720p, 1080p, 4k or WxH; default {DEFAULT_SIZES})",
        )
        parser.add_argument("--runs", type=int, default=7)
        parser.add_argument("--warmup", type=int, default=1)
        parser.add_argument(
            "--device", default=None, help="Intel OIDN's device (auto, cpu, cuda, hip, sycl)"
        )
        parser.add_argument("--json", dest="json_path", default=None, help=JSON_HELP)

    def run(self, args: Any, tools: BenchTools) -> int:
        device = parse_device(args.device)
        rows = []
        for size in args.sizes.split(","):
            rows.append(run_size(tools.denoiser, size.strip(), args.runs, args.warmup, device))
            print(table(rows[-1:]), flush=True)
        if args.json_path:
            write_bench_json(args.json_path, "oidn", "sizes", [asdict(r) for r in rows])
        return 0


BENCHMARK = OidnBenchmark()
