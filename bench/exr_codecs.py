"""What EXR compression costs a denoising farm: read and write times per codec.

A farm node reads each noisy frame (beauty, albedo and normal layers of one multi-layer
half-float EXR, as renderers write them) and writes the denoised beauty. This script
writes one synthetic frame of ``--size`` per compression, then times, medians of
``--runs``:

- ``read``: the three layers read one after another (`oidn_gpu.image.io.read_layer`
  once per layer: the file is decoded three times);
- ``read_shared``: the same three layers inside `io.one_decode_per_file`, as
  ``oidn-gpu denoise`` reads a frame (the file decoded once);
- ``read_once``: the whole file read in one OpenImageIO call (the floor for any reader);
- ``write``: the denoised RGB written as half floats with that compression;

at OpenImageIO's default thread count and with one thread (a farm of one-CPU workers),
and the file sizes. The pixels are smooth gradients plus per-pixel noise, like a noisy
render (pure noise would make every codec look poor, flat colour every codec good).

    python bench/exr_codecs.py --size 1920x1080 --runs 7 --json exr_codecs.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's own alias

from oidn_gpu.image import io

CODECS = ("none", "rle", "zips", "zip", "piz", "pxr24", "b44", "dwaa", "dwab")
LAYERS = ("", "albedo", "N")  # Cycles-like names: R,G,B / albedo.* / N.X,N.Y,N.Z
CHANNELS = ["R", "G", "B", "albedo.R", "albedo.G", "albedo.B", "N.X", "N.Y", "N.Z"]


def synthetic_frame(height: int, width: int, seed: int = 2026) -> np.ndarray:
    """Nine float channels: noisy HDR beauty, smooth albedo, unit normals."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    base = 0.5 + 0.4 * np.sin(x / 97.0)[..., None] * np.cos(y / 61.0)[..., None]
    beauty = base * np.array([1.0, 0.8, 0.6], np.float32)
    beauty = beauty * rng.gamma(2.0, 0.5, (height, width, 3)).astype(np.float32) * 2
    albedo = np.clip(base * np.array([0.7, 0.6, 0.5], np.float32), 0, 1)
    normal = np.stack([np.sin(x / 200.0), np.cos(y / 150.0), np.ones_like(x)], -1)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    return np.concatenate([beauty, albedo, normal], -1).astype(np.float32)


def write_half_exr(path: Path, pixels: np.ndarray, names: list[str], compression: str) -> None:
    """``pixels`` as a half-float EXR with these channel names and compression."""
    spec = oiio.ImageSpec(pixels.shape[1], pixels.shape[0], pixels.shape[2], "half")
    spec.channelnames = tuple(names)
    spec.attribute("compression", compression)
    out = oiio.ImageOutput.create(str(path))
    if out is None or not out.open(str(path), spec):
        raise RuntimeError(f"cannot write {path}: {oiio.geterror()}")
    if not out.write_image(np.ascontiguousarray(pixels)):
        raise RuntimeError(f"cannot write {path}: {out.geterror()}")
    out.close()


def _read_once(path: Path) -> np.ndarray:
    inp = oiio.ImageInput.open(str(path))
    pixels = inp.read_image("float")
    inp.close()
    return pixels


def _read_layers(path: Path) -> list[np.ndarray]:
    return [io.read_layer(path, name or "R,G,B").pixels for name in LAYERS]


def _read_layers_shared(path: Path) -> list[np.ndarray]:
    with io.one_decode_per_file():
        return _read_layers(path)


def _median_s(fn: Any, runs: int) -> float:
    fn()  # warm the page cache and OpenImageIO's plugin
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(height: int, width: int, runs: int, threads: int, folder: Path) -> list[dict]:
    frame = synthetic_frame(height, width)
    names = CHANNELS
    rows = []
    oiio.attribute("threads", threads)
    for codec in CODECS:
        src = folder / f"frame_{codec}.exr"
        write_half_exr(src, frame, names, codec)
        dst = folder / f"out_{codec}.exr"
        beauty = frame[:, :, :3]
        row = {
            "compression": codec,
            "threads": threads or os.cpu_count(),
            "file_mb": src.stat().st_size / 2**20,
            "read_ms": 1e3 * _median_s(lambda src=src: _read_layers(src), runs),
            "read_shared_ms": 1e3 * _median_s(lambda src=src: _read_layers_shared(src), runs),
            "read_once_ms": 1e3 * _median_s(lambda src=src: _read_once(src), runs),
            "write_ms": 1e3
            * _median_s(
                lambda dst=dst, b=beauty, c=codec: write_half_exr(dst, b, ["R", "G", "B"], c), runs
            ),
        }
        rows.append(row)
        print(
            f"{codec:6s} threads {row['threads']:2d}  file {row['file_mb']:6.2f} MB  "
            f"read 3 layers {row['read_ms']:7.1f} ms  shared {row['read_shared_ms']:7.1f} ms  "
            f"once {row['read_once_ms']:7.1f} ms  write RGB {row['write_ms']:7.1f} ms",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1920x1080", help="WIDTHxHEIGHT")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"OpenImageIO {oiio.__version__}, {width}x{height}, medians of {args.runs}"
    )
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in (0, 1):  # 0: OpenImageIO's default, one per core
            rows += measure(height, width, args.runs, threads, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps({"size": [width, height], "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
