"""Tile configurations of the Triton conv: candidates per layer shape, timing, a disk cache.

A `TileConfig` is the ``BLOCK_M x BLOCK_N x BLOCK_K`` tile, warps and pipeline
depth of one conv launch. `candidates` lists a few per launch (N tiles sized to
the output channels; M and K tiles, warps and stages varied); `Tuner` times each
on the real buffers of the layer (`triton.testing.do_bench`, median) the first
time a layer shape is seen, and keeps the fastest in a JSON file keyed by GPU
name, Triton version, precision and the layer signature, so later processes
start tuned. ``OIDN_GPU_CUDA_TUNING`` names the file (default
``~/.cache/oidn-gpu/cuda-tuning.json``); ``OIDN_GPU_CUDA_TUNING=off`` disables
tuning (the default tile is used).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from oidn_gpu.backends.cuda.layout import ConvLaunch

TUNING_ENV_VAR = "OIDN_GPU_CUDA_TUNING"


@dataclass(frozen=True)
class TileConfig:
    """One tile configuration of `triton_kernels.conv3x3_kernel`."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int
    num_stages: int

    def describe(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k} w{self.num_warps} s{self.num_stages}"


def _pow2_at_least(value: int) -> int:
    out = 1
    while out < value:
        out *= 2
    return out


def block_k_for(block_k: int, channels: int) -> tuple[int, int]:
    """``(K tile, taps per K step)`` of one source with ``channels`` stored channels.

    A source narrower than ``block_k`` with 16, 32 or 64 channels covers several taps
    per K step (``block_k // channels``); others use ``block_k`` (or their own
    power-of-two width, if smaller) per tap.
    """
    if channels in (16, 32, 64) and channels < block_k:
        return block_k, block_k // channels
    return max(16, min(block_k, _pow2_at_least(channels))), 1


def default_config(launch: ConvLaunch) -> TileConfig:
    """The untuned tile: 128 pixels x all output channels (up to 128) x 32, 4 warps, 3 stages."""
    block_n = min(128, max(16, _pow2_at_least(launch.out_channels)))
    return TileConfig(128, block_n, 32, 4, 3)


def candidates(launch: ConvLaunch) -> tuple[TileConfig, ...]:
    """A handful of tiles worth timing for ``launch`` (the default first)."""
    first = default_config(launch)
    block_n = first.block_n
    shapes = [
        (128, block_n, 64, 4, 3),
        (256, block_n, 32, 8, 3),
        (64, block_n, 32, 4, 4),
        (128, block_n, 64, 8, 4),
        (256, block_n, 64, 8, 3),
        (128, block_n, 128, 4, 3),
        (128, block_n, 128, 8, 3),
    ]
    if launch.final:
        shapes = [(256, 16, 32, 4, 3), (256, 16, 64, 4, 3), (128, 16, 64, 4, 4),
                  (512, 16, 64, 8, 3), (256, 16, 128, 4, 3)]  # fmt: skip
    elif block_n > 64:
        shapes.append((128, 64, 32, 4, 3))
    out = [first]
    for shape in shapes:
        config = TileConfig(*shape)
        if config not in out:
            out.append(config)
    return tuple(out)


def signature(launch: ConvLaunch, height: int, width: int) -> str:
    """What a tile choice depends on: the conv's sources, channels, flags and size."""
    sources = ",".join(f"{s.stored}{'u' if s.upsample else ''}" for s in launch.sources)
    flags = ("p" if launch.pool else "") + ("f" if launch.final else "")
    return f"{sources}->{launch.out_stored}{flags}@{height}x{width}"


def _cache_path() -> Path | None:
    value = os.environ.get(TUNING_ENV_VAR)
    if value == "off":
        return None
    if value:
        return Path(value)
    return Path.home() / ".cache" / "oidn-gpu" / "cuda-tuning.json"


def tuning_enabled() -> bool:
    """False when ``OIDN_GPU_CUDA_TUNING=off``."""
    return os.environ.get(TUNING_ENV_VAR) != "off"


class Tuner:
    """Per-layer tile choice with a JSON cache on disk.

    Args:
        device_key: GPU name, Triton version and precision (one cache section).
        path: the cache file; None keeps choices in memory only.
    """

    def __init__(self, device_key: str, path: Path | None = None) -> None:
        self.device_key = device_key
        self.path = path if path is not None else _cache_path()
        self._choices: dict[str, TileConfig] = {}
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        try:
            data = json.loads(self.path.read_text())
            section = data.get(self.device_key, {})
            self._choices = {key: TileConfig(**value) for key, value in section.items()}
        except (OSError, ValueError, TypeError):
            self._choices = {}  # an unreadable cache is retuned, never trusted

    def _save(self) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            data = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except (OSError, ValueError):
            data = {}
        data[self.device_key] = {key: asdict(value) for key, value in self._choices.items()}
        try:
            handle, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            with os.fdopen(handle, "w") as f:
                json.dump(data, f, indent=1, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only home only costs retuning next time

    def cached(self, key: str) -> TileConfig | None:
        return self._choices.get(key)

    def choose(
        self,
        key: str,
        configs: tuple[TileConfig, ...],
        time_ms: Callable[[TileConfig], float],
    ) -> TileConfig:
        """The cached choice for ``key``, else the fastest of ``configs`` (then cached).

        ``time_ms`` raises for a config that does not compile or run (skipped).
        """
        found = self._choices.get(key)
        if found is not None:
            return found
        best, best_ms = configs[0], float("inf")
        for config in configs:
            try:
                ms = time_ms(config)
            except Exception:
                continue
            if ms < best_ms:
                best, best_ms = config, ms
        self._choices[key] = best
        self._save()
        return best
