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

import dataclasses
import os
from typing import Any

from oidn_gpu.backends.cuda import layout
from oidn_gpu.backends.cuda.driver_launch import DriverKernel
from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.backends.cuda.tuning import RowsConfig
from oidn_gpu.errors import InvalidArgumentError

ROWS_ENV_VAR = "OIDN_GPU_CUDA_ROWS"  # "off": no layer runs the row kernel


def _switch(name: str, value: str | None = None) -> bool:
    """An on/off setting: ``value``, else the environment variable ``name`` (on unless
    ``off``/``0``)."""
    value = os.environ.get(name, "on") if value is None else value
    if value not in ("on", "off", "1", "0", ""):
        raise InvalidArgumentError(f"{name}={value!r} is unknown; expected on or off")
    return value not in ("off", "0")


def rows_of(rows: bool | None) -> bool:
    """The executor's ``rows`` option: None reads ``OIDN_GPU_CUDA_ROWS`` (on unless
    ``off``/``0``)."""
    if rows is None:
        return _switch(ROWS_ENV_VAR)
    if not isinstance(rows, bool):
        raise InvalidArgumentError(f"rows {rows!r} must be a bool or None")
    return rows


def _launch_args(
    ex: Any, prep: Any, conv: ConvLaunch, config: RowsConfig, project: bool
) -> tuple[tuple[int, int], tuple[Any, ...], dict[str, Any]]:
    """The grid, arguments and options of ``conv``'s row-kernel launch."""
    height, width = layout.conv_shapes(prep.plan, conv)
    source = conv.sources[0]
    weight, bias = ex._weights[conv.name]
    out = prep.scratch if project else prep.views[conv.value]
    proj = ex._weights["project"][0] if project else weight
    grid = (-(-width // config.block_w), -(-height // config.rows))
    args = (
        prep.views[source.value],
        weight,
        bias,
        proj,
        out,
        height,
        width,
        conv.a_tap_rows,
        conv.weight_cols,
        conv.out_stored,
        config.rows,
    )
    options = dict(
        RELU=conv.relu,
        POOL=conv.pool,
        PROJECT=project,
        CHANNELS=source.stored,
        BLOCK_W=config.block_w,
        BLOCK_N=conv.out_stored,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
    )
    return grid, args, options


def launch(ex: Any, prep: Any, conv: ConvLaunch, config: RowsConfig, project: bool = False) -> None:
    """Enqueue ``conv`` on the row kernel; with ``project`` (the ``project`` tail's hidden
    conv) it stores the final conv's per-tap partial sums into ``prep.scratch``."""
    grid, args, options = _launch_args(ex, prep, conv, config, project)
    ex.row_kernels().conv_rows_kernel[grid](*args, **options)


# ----------------------------------------------------------------------------- balance
#
# A row-kernel launch is a grid of equal programs (one strip of columns, ``rows`` output
# rows each). A multiprocessor holds only a few of them at once (their registers and
# shared memory), so the launch runs in rounds; a last round of a few programs leaves most
# of the GPU idle while it takes as long as a full one. On an H200 (132 multiprocessors,
# Triton 3.6) the `project` tail's kernel takes 198 KB of shared memory (one program per
# multiprocessor) and `enc_conv1`'s 98 KB (two): at 1280x720 the shipped 32 rows give 460
# programs, 3.5 and 1.7 rounds. Each step's time alone followed
# ``ceil(programs / (resident * multiprocessors)) * (rows + 2)`` across 11 row counts
# (docs/benchmarks.md, 2026-12-02): 56 rows (260 programs) took the tail 0.166 ms
# against 0.191, enc_conv1 0.053 against 0.063, and 28 rows enc_conv0 (four resident)
# 0.034 against 0.037; the bits are the same for every row count.

BALANCE_ENV_VAR = "OIDN_GPU_CUDA_ROW_BALANCE"  # "off": keep the configured rows per program
BALANCE_ROWS = tuple(range(16, 66, 2))  # even (the pool's row pairs), 16 to 64


def balance_of(value: str | None = None) -> bool:
    """Whether `balance` runs: ``OIDN_GPU_CUDA_ROW_BALANCE`` (on unless ``off``/``0``)."""
    return _switch(BALANCE_ENV_VAR, value)


def balanced_rows(
    height: int, width: int, config: RowsConfig, resident: int, multiprocessors: int
) -> int:
    """The rows per program (of `BALANCE_ROWS`) that finish a ``height x width`` launch of
    ``config`` soonest where each of ``multiprocessors`` runs ``resident`` programs at once:
    ``ceil(programs / (resident * multiprocessors))`` rounds of ``rows + 2`` input rows (a
    program also reads the row above and below its own). Ties keep ``config.rows``, then
    the fewest rows."""
    if resident < 1 or multiprocessors < 1:
        raise ValueError(f"{resident} programs on {multiprocessors} multiprocessors")
    slots = resident * multiprocessors
    strips = -(-width // config.block_w)

    def cost(rows: int) -> int:
        return -(-strips * -(-height // rows) // slots) * (rows + 2)

    return min(BALANCE_ROWS, key=lambda rows: (cost(rows), rows != config.rows, rows))


def resident_programs(
    registers: int, shared: int, num_warps: int, properties: dict[str, int]
) -> int:
    """Programs of a kernel one multiprocessor holds at once: its registers per thread
    (allocated per warp in 256s), its shared memory (plus the 1 KB the GPU reserves per
    block) and its threads against the multiprocessor's 64 K registers, ``max_shared_mem``
    and 2,048 threads (CUDA C programming guide, compute capabilities 8.x-9.x)."""
    per_warp = -(-max(registers, 1) * 32 // 256) * 256
    by_registers = properties.get("max_num_regs", 65536) // (per_warp * num_warps)
    by_shared = properties["max_shared_mem"] // (shared + 1024) if shared else 32
    by_threads = 2048 // (32 * num_warps)
    return max(1, min(by_registers, by_shared, by_threads, 32))


def gpu_limits(
    ex: Any, prep: Any, conv: ConvLaunch, config: RowsConfig, project: bool
) -> tuple[int, int] | None:
    """``(programs one multiprocessor holds, multiprocessors)`` for ``conv``'s launch on the
    executor's GPU, from the kernel's registers and shared memory: read from the CUDA
    driver where the kernel is loaded through it (`driver_launch`), else by having Triton
    compile (not run) it. None where this Triton does not tell them."""
    torch = ex._torch
    index = ex.device.index if ex.device.index is not None else torch.cuda.current_device()
    grid, args, options = _launch_args(ex, prep, conv, config, project)
    kernel = ex.row_kernels().conv_rows_kernel
    found = kernel.find(index, args, options) if isinstance(kernel, DriverKernel) else None
    if found is not None:  # loaded through the driver: its registers without Triton
        registers, shared = kernel.launches.registers(found, index)
        properties = kernel.launches.device_properties(index)
        resident = resident_programs(registers, shared, config.num_warps, properties)
        return resident, properties["multiprocessor_count"]
    from triton.runtime import driver

    with torch.cuda.device(index):  # Triton compiles for, and loads onto, the current GPU
        compiled = kernel.warmup(*args, grid=grid, **options)
        try:
            properties = driver.active.utils.get_device_properties(index)
            compiled._init_handles()
            registers, shared = int(compiled.n_regs), int(compiled.metadata.shared)
            resident = resident_programs(registers, shared, config.num_warps, properties)
            return resident, int(properties["multiprocessor_count"])
        except (AttributeError, KeyError, TypeError):
            return None


def balance(
    ex: Any, prep: Any, launches: list[tuple[str, ConvLaunch, bool]], limits: Any = gpu_limits
) -> None:
    """Set each row-kernel launch of ``prep`` (``launches``: `fusion.row_launches`) to its
    `balanced_rows` (the same bits for any rows) under ``limits`` (`gpu_limits`'s
    signature); a launch without limits keeps its configured rows."""
    for key, conv, project in launches:
        config = prep.configs[key]
        found = limits(ex, prep, conv, config, project)
        if found is None:
            continue
        height, width = layout.conv_shapes(prep.plan, conv)
        rows = balanced_rows(height, width, config, *found)
        if rows != config.rows:
            prep.configs[key] = dataclasses.replace(config, rows=rows)
