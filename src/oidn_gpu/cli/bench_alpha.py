"""``oidn-gpu bench --alpha denoise ...``: the time of a frame whose alpha is denoised
(`Denoiser.denoise` with ``alpha="denoise"``) beside the same frame's RGB denoise.

Two `Denoiser`s of the same options (HDR, the colour with albedo and normal,
``--quality``, default high) on ``--backend`` denoise random images of ``--size``: one an
RGB colour, the other the same colour with an alpha channel and ``alpha="denoise"`` (the
colour once more, then the alpha fitted to the albedo's coverage and denoised with the
fast LDR weights and the same albedo), each
keeping its own buffers as a renderer's sequence of RGB or of RGBA frames does. The two
calls alternate, run after run, so a machine's load weighs on both alike; each row gives
the median wall milliseconds per call (after the GPU is idle, on a CUDA device) and their
ratio. The rows: NumPy arrays in and
out, and, where the backend denoises torch tensors on their device (cuda), tensors on it.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from oidn_gpu.backends.base import DeviceRunner
from oidn_gpu.backends.bench_result import parse_size
from oidn_gpu.cli.backend_flags import add_backend_flags, backend_options
from oidn_gpu.filter import Denoiser

IMAGES_STATE = 7  # numpy.random.default_rng(IMAGES_STATE): every run times the same images


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oidn-gpu bench --alpha denoise",
        description="Time a frame whose alpha is denoised against its RGB denoise.",
    )
    parser.add_argument("--alpha", choices=("denoise",), required=True, help='time alpha="denoise"')
    parser.add_argument("--size", default="1080p", help="720p, 1080p, 4k or WIDTHxHEIGHT")
    parser.add_argument("--quality", default="high", choices=("fast", "balanced", "high"))
    parser.add_argument("--runs", type=int, default=20, help="timed calls of each (median)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed calls of each first")
    add_backend_flags(parser.add_argument_group("backend (as oidn-gpu denoise)"))
    return parser


def _images(height: int, width: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(IMAGES_STATE)
    colour = (rng.random((height, width, 3)) * 4).astype(np.float32)
    alpha = rng.random((height, width, 1)).astype(np.float32)
    return {
        "rgb": colour,
        "rgba": np.concatenate([colour, alpha], axis=2),
        "albedo": rng.random((height, width, 3)).astype(np.float32),
        "normal": (rng.random((height, width, 3)) * 2 - 1).astype(np.float32),
    }


def _alternating_medians(
    dens: tuple[Denoiser, Denoiser],
    calls: Sequence[Callable[[], Any]],
    idle: Callable[[], None],
    runs: int,
    warmup: int,
) -> list[float]:
    """Median wall ms of each call, the calls taking turns run after run; timed once the
    kernels a backend compiles in the background (cuda) serve both denoisers."""
    for _ in range(warmup):
        for call in calls:
            call()
    for den in dens:
        den.wait_compiled()
    for helper in dens[1]._prefilters.values():  # the alpha's denoiser, on its device
        helper.wait_compiled()
    for call in calls:
        call()
    idle()
    times: list[list[float]] = [[] for _ in calls]
    for _ in range(runs):
        for call, kept in zip(calls, times, strict=True):
            start = time.perf_counter()
            call()
            idle()
            kept.append((time.perf_counter() - start) * 1e3)
    return [statistics.median(kept) for kept in times]


def _takes_tensors(den: Denoiser) -> bool:
    return any(isinstance(e.runner, DeviceRunner) for e in den._engines.values())


def _tensor_row(
    dens: tuple[Denoiser, Denoiser], images: dict[str, np.ndarray], args: Any
) -> list[float]:
    import torch  # only for a backend that takes tensors

    rgb, rgba = dens
    runner = next(iter(rgb._engines.values())).runner
    device = runner.device
    on = {name: torch.from_numpy(a).to(device) for name, a in images.items()}

    def idle() -> None:
        if device.type != "cpu":  # a CUDA device (the CPU under the interpreter)
            torch.cuda.synchronize(device)

    return _alternating_medians(
        dens,
        [
            lambda: rgb.denoise(on["rgb"], on["albedo"], on["normal"]),
            lambda: rgba.denoise(on["rgba"], on["albedo"], on["normal"], alpha="denoise"),
        ],
        idle,
        args.runs,
        args.warmup,
    )


def run(args: argparse.Namespace) -> list[tuple[str, float, float]]:
    """``(row, RGB ms, RGBA with alpha="denoise" ms)`` of each row."""
    height, width = parse_size(args.size)
    images = _images(height, width)
    options = backend_options(args)
    rows = []
    settings = dict(hdr=True, quality=args.quality, backend=args.backend, **options)
    with Denoiser(**settings) as rgb, Denoiser(**settings) as rgba:
        numpy_row = _alternating_medians(
            (rgb, rgba),
            [
                lambda: rgb.denoise(images["rgb"], images["albedo"], images["normal"]),
                lambda: rgba.denoise(
                    images["rgba"], images["albedo"], images["normal"], alpha="denoise"
                ),
            ],
            lambda: None,
            args.runs,
            args.warmup,
        )
        rows.append(("NumPy arrays", *numpy_row))
        if _takes_tensors(rgb):
            rows.append(("torch tensors on the device", *_tensor_row((rgb, rgba), images, args)))
        info = rgb.info()
    print(
        f'a frame with alpha="denoise" against its RGB denoise: {info.backend} on '
        f"{info.device}, {width}x{height}, quality {args.quality}, median of {args.runs} "
        f"runs after {args.warmup} warm-up, alternating"
    )
    print('| images | RGB | RGBA, alpha="denoise" | ratio |')
    print("| --- | ---: | ---: | ---: |")
    for name, rgb_ms, rgba_ms in rows:
        print(f"| {name} | {rgb_ms:.2f} ms | {rgba_ms:.2f} ms | {rgba_ms / rgb_ms:.2f}x |")
    return [(name, rgb_ms, rgba_ms) for name, rgb_ms, rgba_ms in rows]


def main(argv: Sequence[str]) -> int:
    args = build_parser().parse_args(list(argv))
    run(args)
    return 0
