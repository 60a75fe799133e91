"""``oidn-gpu prepare``: compile a backend's kernels ahead of a render, into the per-user caches.

A GPU backend that compiles its kernels on first use (cuda: Triton's) makes a new
process's first frames wait for, or run beside, that compile. ``prepare`` runs
one small frame of each filter configuration asked for and waits until its
kernels are compiled, so that every later process of the same user on this
machine (farm workers and Ray actors included) finds them in the caches: Triton's
disk cache (``TRITON_CACHE_DIR``, default ``~/.triton/cache``) and oidn-gpu's
list of each configuration's kernels (``OIDN_GPU_CACHE_DIR``, default
``~/.cache/oidn-gpu``). Run it when a container image or a farm node is built.

``--export DIR`` then writes what ships with the package for this GPU
architecture and Triton version (the kernel lists and Triton's cache entries).
"""

from __future__ import annotations

import argparse
import itertools
import time
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.backends.base import get_backend, resolve_backend
from oidn_gpu.cli.backend_flags import add_backend_flags, backend_options
from oidn_gpu.cli.usage import EXIT_FAILURE, EXIT_OK, UsageError
from oidn_gpu.filter import Denoiser

INPUTS = {"hdr": {"hdr": True}, "ldr": {}, "srgb": {"srgb": True}}
AUX = ("albedo+normal", "albedo", "none")
QUALITIES = ("high", "balanced", "fast")


def add_prepare_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "prepare",
        help="compile a backend's kernels ahead of a render (container images, farm nodes)",
        description=__doc__.split("\n\n")[1],
    )
    parser.add_argument(
        "--inputs",
        nargs="+",
        choices=tuple(INPUTS),
        default=["hdr"],
        help="the color images to prepare for (default: hdr)",
    )
    parser.add_argument(
        "--aux",
        nargs="+",
        choices=AUX,
        default=["albedo+normal"],
        help="auxiliary images given with the color (default: albedo+normal)",
    )
    parser.add_argument(
        "--quality", nargs="+", choices=QUALITIES, default=["high"], help="default: high"
    )
    parser.add_argument(
        "--size",
        type=_size,
        default=(1080, 1920),
        metavar="WxH",
        help="the frame's size (default 1920x1080; the kernels compiled do not depend on it)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds to wait for one configuration's kernels (default 600)",
    )
    parser.add_argument(
        "--export",
        type=Path,
        metavar="DIR",
        help="then write the kernels this GPU compiled as the package ships them, into DIR",
    )
    add_backend_flags(parser.add_argument_group("backend options"))


def _size(text: str) -> tuple[int, int]:
    """``WxH`` -> ``(H, W)``."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        width = height = 0
    if width < 1 or height < 1:
        raise argparse.ArgumentTypeError(f"expected a size like 1920x1080, got {text!r}")
    return height, width


def _images(aux: str, size: tuple[int, int], rng: np.random.Generator) -> tuple[Any, Any, Any]:
    shape = (*size, 3)
    color = rng.random(shape, dtype=np.float32)
    albedo = rng.random(shape, dtype=np.float32) if aux != "none" else None
    normal = rng.random(shape, dtype=np.float32) * 2 - 1 if aux == AUX[0] else None
    return color, albedo, normal


def cmd_prepare(args: argparse.Namespace) -> int:
    """Prepare every configuration asked for; one line each, then the export."""
    extra = backend_options(args)
    backend = resolve_backend(args.backend, extra)
    rng = np.random.default_rng(1)
    failed = 0
    for inputs, aux, quality in itertools.product(args.inputs, args.aux, args.quality):
        name = f"{inputs}, {aux}, quality {quality}"
        start = time.perf_counter()
        with Denoiser(backend=backend, quality=quality, **INPUTS[inputs], **extra) as den:
            images = _images(aux, args.size, rng)
            den.denoise(*images)
            ready = den.wait_compiled(args.timeout)
            den.denoise(*images)  # on the compiled kernels when they are ready
            info = den.info()
        where = info.device if info is not None else backend
        if ready:
            print(f"prepared {name}: {time.perf_counter() - start:.1f} s ({where})")
        else:
            failed += 1
            print(f"not ready after {args.timeout:g} s: {name} ({where})")
    if args.export is not None:
        export = getattr(get_backend(backend), "export_kernels", None)
        if export is None:
            raise UsageError(f"--export: the {backend} backend ships no compiled kernels")
        for line in export(args.export):
            print(line)
    return EXIT_FAILURE if failed else EXIT_OK
