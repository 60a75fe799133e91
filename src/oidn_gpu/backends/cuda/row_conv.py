"""The row-streaming conv (`row_kernels.conv_rows_kernel`) for a `CudaExecutor` (``ex``).

Full-resolution convs with few channels (the OIDN U-Nets' ``enc_conv0``, ``enc_conv1`` with
its pool, ``dec_conv1b`` and the ``project`` tail) are bound by loading their input once per
tap and their weights once per K step. The row kernel holds the weights in shared memory,
loads each input row once per column shift and reuses it for the three output rows it
touches; its outputs are the per-layer kernel's bits. A layer that `tuning.rows_eligible`
admits runs it when the tuning cache has a ``rows:`` entry for its signature or
`tuning.SHIPPED_ROWS` a tile for the GPU (or one is set in ``prep.configs``), while the
executor's ``rows`` option is on (default; ``OIDN_GPU_CUDA_ROWS=off`` or ``rows=False`` keeps
every layer on the per-layer kernel)."""

from __future__ import annotations

import os
from typing import Any

from oidn_gpu.backends.cuda import layout
from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.backends.cuda.tuning import RowsConfig
from oidn_gpu.errors import InvalidArgumentError

ROWS_ENV_VAR = "OIDN_GPU_CUDA_ROWS"  # "off": no layer runs the row kernel


def rows_of(rows: bool | None) -> bool:
    """The executor's ``rows`` option: None reads ``OIDN_GPU_CUDA_ROWS`` (on unless
    ``off``/``0``)."""
    if rows is None:
        value = os.environ.get(ROWS_ENV_VAR, "on")
        if value not in ("on", "off", "1", "0", ""):
            raise InvalidArgumentError(f"{ROWS_ENV_VAR}={value!r} is unknown; expected on or off")
        return value not in ("off", "0")
    if not isinstance(rows, bool):
        raise InvalidArgumentError(f"rows {rows!r} must be a bool or None")
    return rows


def launch(ex: Any, prep: Any, conv: ConvLaunch, config: RowsConfig,
           project: bool = False) -> None:  # fmt: skip
    """Enqueue ``conv`` on the row kernel; with ``project`` (the ``project`` tail's hidden
    conv) it stores the final conv's per-tap partial sums into ``prep.scratch``."""
    height, width = layout.conv_shapes(prep.plan, conv)
    source = conv.sources[0]
    weight, bias = ex._weights[conv.name]
    out = prep.scratch if project else prep.views[conv.value]
    proj = ex._weights["project"][0] if project else weight
    grid = (-(-width // config.block_w), -(-height // config.rows))
    ex.row_kernels().conv_rows_kernel[grid](
        prep.views[source.value], weight, bias, proj, out,
        height, width, conv.a_tap_rows, conv.weight_cols, conv.out_stored,
        RELU=conv.relu, POOL=conv.pool, PROJECT=project, CHANNELS=source.stored,
        BLOCK_W=config.block_w, BLOCK_N=conv.out_stored, ROWS=config.rows,
        num_warps=config.num_warps, num_stages=config.num_stages,
    )  # fmt: skip
