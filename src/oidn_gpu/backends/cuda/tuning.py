"""Tile configurations of the Triton conv: a shipped table, candidates, timing, a disk cache.

A `TileConfig` is the ``BLOCK_M x BLOCK_N x BLOCK_K`` tile, warps and pipeline
depth of one conv launch. A layer's tile never depends on the image size: its
`signature` is the conv's sources, channels, flags and resolution level (0 at
full resolution, 1 after one pool, ...), so a new image size reuses the compiled
kernels.

Where a tile comes from, first match wins:

1. a tuning cache written by an earlier tuning run on this GPU (``oidn-gpu tune``,
   or ``OIDN_GPU_CUDA_TUNING=on``/a path): a JSON file keyed by GPU name, Triton
   version and precision (default ``cuda-tuning.json`` in oidn-gpu's per-user cache
   folder, `user_cache.cache_root`; updated under a file lock, so processes tuning at
   once keep each other's entries);
2. `SHIPPED_TILES`, measured on the GPUs named there (by compute capability);
3. `default_config`.

Layers that `rows_eligible` admits may run the row kernel (`row_kernels`) with a
`RowsConfig`: the cache's ``rows:`` entry of their signature, else `SHIPPED_ROWS`; it takes
precedence over the layer's `TileConfig` while the executor's ``rows`` option is on.

The fused tail's ``tail`` kernel has its own `TailConfig` (2D tile, halo, persistent
programs), cached under ``tail:`` keys; the ``project`` tail uses the hidden conv's tile
unless `SHIPPED_TILES` has its `project_signature`.

Tuning never runs unless asked: ``OIDN_GPU_CUDA_TUNING=on`` (default file) or
``OIDN_GPU_CUDA_TUNING=/path/file.json`` times `candidates` for each layer the
first time its signature is seen (`triton.testing.do_bench`, median) and keeps
the fastest; ``OIDN_GPU_CUDA_TUNING=off`` ignores the cache file too.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.user_cache import cache_root, update_json

_LOG = logging.getLogger(__name__)

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
        shapes = [
            (256, 16, 32, 4, 3),
            (256, 16, 64, 4, 3),
            (128, 16, 64, 4, 4),
            (512, 16, 64, 8, 3),
            (256, 16, 128, 4, 3),
        ]
    elif block_n > 64:
        shapes.append((128, 64, 32, 4, 3))
    out = [first]
    for shape in shapes:
        config = TileConfig(*shape)
        if config not in out:
            out.append(config)
    return tuple(out)


def signature(launch: ConvLaunch, level: int) -> str:
    """What a tile choice depends on: the conv's sources, channels, flags and resolution
    level (how many 2x2 pools before it: 0 at full resolution); never the image size."""
    sources = ",".join(f"{s.stored}{'u' if s.upsample else ''}" for s in launch.sources)
    flags = ("p" if launch.pool else "") + ("f" if launch.final else "")
    return f"{sources}->{launch.out_stored}{flags}@{level}"


# Tiles timed by `Tuner` on an NVIDIA H200 (Triton 3.6, fp16, rt_hdr_alb_nrm at 1920x1088,
# 2026-12-01; docs/benchmarks.md), by compute capability: the H100
# and H200 share sm_90. Tuples are (block_m, block_n, block_k, num_warps, num_stages).
# The quarter- and sixteenth-resolution ones outside the tuner's candidates (80->96@4,
# 96->96@4, 96->96@2 and the fast network's) from a wider sweep at 1280x720 and 1920x1088,
# each layer alone (docs/benchmarks.md): enc_conv5a 10.6 -> 7.7 us
# at 720p, enc_conv5b 13.1 -> 7.7, dec_conv3b 37.3 -> 34.6 (81.5 -> 74.6 at 1080p).
# Used for bf16 too (same tile shapes; its timing was not separately measured).
SHIPPED_TILES: dict[tuple[int, int], dict[str, tuple[int, int, int, int, int]]] = {
    (9, 0): {
        "16->32@0": (128, 32, 32, 4, 3),
        "32->32p@0": (128, 32, 32, 4, 3),
        "32->48p@1": (128, 64, 32, 4, 3),
        "48->64p@2": (128, 64, 32, 4, 3),
        "64->80p@3": (128, 128, 128, 8, 3),
        "80->96@4": (64, 64, 32, 4, 3),
        "96->96@4": (64, 64, 32, 4, 3),
        "96u,64->112@3": (128, 128, 32, 4, 3),
        "112->112@3": (128, 128, 64, 4, 3),
        "112u,48->96@2": (128, 128, 64, 4, 3),
        "96->96@2": (128, 128, 32, 4, 3),
        "96u,32->64@1": (128, 64, 32, 4, 3),
        "64->64@1": (128, 64, 64, 4, 3),
        "64u,16->64@0": (128, 64, 32, 4, 3),
        "64->32@0": (128, 32, 32, 4, 3),
        "32->16f@0": (256, 16, 32, 4, 3),
        # the fast network's own (rt_hdr_alb_nrm_small)
        "32->32p@2": (256, 32, 32, 8, 3),
        "32->32@4": (64, 32, 64, 4, 3),
        "64->64@2": (128, 64, 64, 4, 3),
        "64->64@3": (128, 64, 64, 4, 3),
    },
}


@dataclass(frozen=True)
class RowsConfig:
    """One tile configuration of `row_kernels.conv_rows_kernel`: a strip of ``block_w``
    columns and ``rows`` output rows per program, warps, pipeline depth."""

    block_w: int
    rows: int
    num_warps: int
    num_stages: int

    def describe(self) -> str:
        return f"rows {self.block_w}x{self.rows} w{self.num_warps} s{self.num_stages}"


ROW_CHANNELS = (16, 32, 64)  # stored input channels the row kernel takes (one K step a tap)


def rows_eligible(launch: ConvLaunch) -> bool:
    """Whether `row_kernels.conv_rows_kernel` can run ``launch``: one source, not upsampled,
    of 16, 32 or 64 stored channels, at most 64 output channels (a power of two), not final."""
    (source, *rest) = launch.sources
    out = launch.out_stored
    return (
        not rest
        and not source.upsample
        and not launch.final
        and source.stored in ROW_CHANNELS
        and out <= 64
        and not out & (out - 1)
    )


# Row-kernel tiles by compute capability (see `SHIPPED_TILES`), keyed by `signature`; a
# layer listed here runs `row_kernels.conv_rows_kernel` while the executor's ``rows`` option
# is on. Timed on an NVIDIA H200 (Triton 3.6, fp16, rt_hdr_alb_nrm at 1920x1088,
# 2026-12-01, docs/benchmarks.md): each layer alone, per-layer
# kernel -> row kernel, the same output bits: enc_conv0 0.136 -> 0.073 ms, enc_conv1 + pool
# 0.213 -> 0.124 ms, the `project` tail 0.497 -> 0.439 ms; dec_conv2b (64->64@1) was slower
# (0.128 against 0.120 ms) and stays on the per-layer kernel. The fast network's own
# signatures (rt_hdr_alb_nrm_small at 1920x1088, docs/benchmarks.md): its `project`
# tail (32->32@0) 0.330 -> 0.260 ms, enc_conv2 + pool (32->32p@1) 0.055 -> 0.033 ms,
# dec_conv2b (64->32@1) 0.095 -> 0.080 ms, the same bits; its quarter-resolution and
# smaller layers were not faster (enc_conv3: 0.018 against 0.018-0.026 ms).
SHIPPED_ROWS: dict[tuple[int, int], dict[str, tuple[int, int, int, int]]] = {
    (9, 0): {
        "16->32@0": (64, 32, 4, 3),
        "32->32p@0": (64, 32, 4, 3),
        "64->32@0": (64, 32, 4, 3),
        "32->32@0": (64, 32, 4, 3),
        "32->32p@1": (64, 32, 4, 3),
        "64->32@1": (64, 32, 4, 3),
    },
}


def shipped_rows(capability: tuple[int, int] | None, key: str) -> RowsConfig | None:
    """The shipped row-kernel tile of a layer signature on a GPU of ``capability``."""
    shape = SHIPPED_ROWS.get(capability or (0, 0), {}).get(key)
    return RowsConfig(*shape) if shape is not None else None


def shipped_config(capability: tuple[int, int] | None, key: str) -> TileConfig | None:
    """The shipped tile of a layer signature on a GPU of ``capability``, if measured."""
    shape = SHIPPED_TILES.get(capability or (0, 0), {}).get(key)
    return TileConfig(*shape) if shape is not None else None


@dataclass(frozen=True)
class TailConfig:
    """One tile configuration of `fused_kernels.conv_tail_kernel` (the fused network tail).

    ``region_h x region_w`` pixels of the hidden conv per tile (its output tile is 2
    smaller each way), computed ``block_m`` pixels at a time; K tiles of the hidden
    and final convs; warps, pipeline depth and persistent programs per multiprocessor.
    """

    region_h: int
    region_w: int
    block_m: int
    block_k1: int
    block_k2: int
    num_warps: int
    num_stages: int
    per_sm: int

    def describe(self) -> str:
        return (
            f"{self.region_h}x{self.region_w}/{self.block_m} k{self.block_k1},{self.block_k2} "
            f"w{self.num_warps} s{self.num_stages} p{self.per_sm}"
        )


DEFAULT_TAIL = TailConfig(16, 32, 128, 64, 64, 4, 2, 4)

# Tail tiles by compute capability (see `SHIPPED_TILES`), keyed by `tail_signature`.
SHIPPED_TAILS: dict[tuple[int, int], dict[str, tuple[int, ...]]] = {}


def tail_signature(hidden: ConvLaunch, final: ConvLaunch) -> str:
    """What a fused tail's tile depends on: both convs' channels (never the image size)."""
    return f"tail:{signature(hidden, 0)}|{signature(final, 0)}"


def project_signature(hidden: ConvLaunch) -> str:
    """The tile key of the hidden conv with the final conv's product in its epilogue
    (`fused_kernels.conv_project_kernel`); its tile, when measured, is in `SHIPPED_TILES`."""
    return f"{signature(hidden, 0)}+project"


def tail_candidates() -> tuple[TailConfig, ...]:
    """Fused-tail tiles worth timing (the default first)."""
    shapes = [
        (16, 16, 128, 64, 64, 4, 2, 4),
        (16, 32, 256, 64, 64, 8, 2, 2),
        (32, 32, 128, 64, 64, 4, 2, 2),
        (16, 32, 128, 128, 64, 4, 2, 4),
        (16, 64, 256, 64, 64, 8, 2, 2),
        (16, 32, 128, 64, 64, 4, 3, 3),
    ]
    out = [DEFAULT_TAIL]
    out += [TailConfig(*shape) for shape in shapes if TailConfig(*shape) != DEFAULT_TAIL]
    return tuple(out)


def shipped_tail(capability: tuple[int, int] | None, key: str) -> TailConfig | None:
    """The shipped fused-tail tile of ``key`` on a GPU of ``capability``, if measured."""
    shape = SHIPPED_TAILS.get(capability or (0, 0), {}).get(key)
    return TailConfig(*shape) if shape is not None else None


def rows_key(key: str) -> str:
    """The tuning cache's key of the row-kernel tile of a layer signature."""
    return f"rows:{key}"


def _config_type(key: str) -> type:
    if key.startswith("tail:"):
        return TailConfig
    return RowsConfig if key.startswith("rows:") else TileConfig


CACHE_NAME = "cuda-tuning.json"  # in `user_cache.cache_root`


def cache_path() -> Path | None:
    """The tuning cache file (None with ``OIDN_GPU_CUDA_TUNING=off``)."""
    return _cache_path()


def _cache_path() -> Path | None:
    value = os.environ.get(TUNING_ENV_VAR)
    if value == "off":
        return None
    if value and value != "on":
        return Path(value)
    return cache_root() / CACHE_NAME


def tuning_enabled() -> bool:
    """True when ``OIDN_GPU_CUDA_TUNING`` asks for tuning (``on`` or a cache path)."""
    return os.environ.get(TUNING_ENV_VAR, "off") not in ("", "off")


class Tuner:
    """Per-layer tile choice with a JSON cache on disk.

    Args:
        device_key: GPU name, Triton version and precision (one cache section).
        path: the cache file; None keeps choices in memory only.
    """

    def __init__(self, device_key: str, path: Path | None = None) -> None:
        self.device_key = device_key
        self.path = path if path is not None else _cache_path()
        self._choices: dict[str, TileConfig | TailConfig | RowsConfig] = {}
        self._load()

    def _load(self) -> None:
        if self.path is None or not self.path.is_file():
            return
        try:
            data = json.loads(self.path.read_text())
            section = data.get(self.device_key, {})
            self._choices = {key: _config_type(key)(**value) for key, value in section.items()}
        except (OSError, ValueError, TypeError):
            self._choices = {}  # an unreadable cache is retuned, never trusted

    def _save(self) -> None:
        """Merge this tuner's choices into the file's section under the file's lock: entries
        another process wrote since `_load` are kept (and adopted)."""
        if self.path is None:
            return
        ours = {key: asdict(value) for key, value in self._choices.items()}

        def merge(data: dict) -> dict:
            section = data.get(self.device_key)
            section = dict(section) if isinstance(section, dict) else {}
            section.update(ours)
            data[self.device_key] = section
            return data

        try:
            update_json(self.path, merge)
        except OSError as err:  # a read-only home only costs retuning next time
            _LOG.info("cuda: tuning cache not saved to %s (%s)", self.path, err)

    def cached(self, key: str) -> TileConfig | None:
        return self._choices.get(key)

    def choices(self) -> dict[str, TileConfig]:
        """Every cached choice of this GPU section (signature -> tile)."""
        return dict(self._choices)

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
