"""Frames and jobs shared by the render-farm tests (imported by name, like cli_support)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from oidn_gpu import DenoiserConfig, FilterOptions, sequence
from oidn_gpu.image import io

FRAME_COUNT = 40
# Frame edges: 16 to 32 px, several sizes so that every worker builds several plans.
FRAME_SIZES = (16, 20, 24, 28, 32)
CONFIG = DenoiserConfig.create(FilterOptions(quality="high"), backend="reference")


def write_frames(folder: Path, count: int, seed: int = 7) -> list[Path]:
    """``count`` noisy HDR frames ``frame_0000.exr``... of 16 to 32 px, color only."""
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(count):
        height = FRAME_SIZES[i % len(FRAME_SIZES)]
        width = FRAME_SIZES[(i * 3 + 1) % len(FRAME_SIZES)]
        base = rng.uniform(0.0, 2.0, (1, 1, 3))
        noise = rng.exponential(0.5, (height, width, 3))
        pixels = (base * noise).astype(np.float32)
        paths.append(
            io.write_image_atomic(folder / f"frame_{i:04d}.exr", pixels, pixel_format="float")
        )
    return paths


def jobs_for(inputs: list[Path], out: Path) -> list[sequence.FrameJob]:
    return [sequence.FrameJob(src, out / src.name) for src in inputs]
