"""Which kernel runs each layer of a `CudaExecutor` (``ex``): its `info` and bench tables.

`kernel_names` describes each layer's kernel and tile for one prepared shape;
`info_state` is everything that description and `CudaExecutor.info` depend on, so
that a repeated `info` (one per denoise) reuses its last answer while nothing changed.
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.backends.cuda.tuning import RowsConfig, project_signature


def info_state(ex: Any, prep: Any) -> tuple[Any, ...]:
    """What `CudaExecutor.info` depends on: the engines, the fallback and the prepared
    shape's tiles (frozen configs, compared by value; the shape itself is not kept)."""
    if prep is None:
        return (ex.last_engine, ex.engine, ex.fallback, None)
    return (ex.last_engine, ex.engine, ex.fallback, tuple(prep.configs.items()), prep.tail)


def kernel_names(ex: Any, prep: Any, engine: str) -> dict[str, str]:
    """Layer -> kernel description on ``engine`` (with ``prep``'s tiles when given)."""
    out = {}
    for launch in ex.launches:
        if engine != "triton":
            kind = "cudnn-conv2d" + ("+maxpool" if launch.pool else "")
            if any(s.upsample for s in launch.sources):
                kind = "upsample+concat+" + kind
        else:
            kind = _triton_kind(ex, prep, launch)
        out[launch.name] = kind
    return out


def _triton_kind(ex: Any, prep: Any, launch: Any) -> str:
    rowed = prep is not None and isinstance(prep.configs[launch.name], RowsConfig)
    kind = "triton-rows" if rowed else "triton-igemm"
    if launch.parity:
        kind += "-2x2parity"
    if launch.pool:
        kind += "+maxpool"
    if any(s.upsample for s in launch.sources):
        kind = "upsample+concat+" + kind
    if launch.final:
        kind += "+output"
    if prep is not None:
        kind += f" [{prep.configs[launch.name].describe()}]"
    if ex.tail is not None and launch in ex.tail.layers:
        kind = f"triton-fused-{ex.fusion}+output"
        if prep is not None and ex.fusion == "tail" and prep.tail is not None:
            kind += f" [{prep.tail.describe()}]"
        elif prep is not None:
            kind += f" [{prep.configs[project_signature(ex.tail.hidden)].describe()}]"
    return kind
