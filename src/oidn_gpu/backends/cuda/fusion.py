"""How the CUDA backend runs the network's tail: the last hidden conv, the final conv and
the output pass (`CudaExecutor`'s ``fused`` option, ``OIDN_GPU_CUDA_FUSED``).

`fused_tail` finds the tail in a network's launches (the OIDN U-Nets' ``dec_conv1b ->
dec_conv0``); `FUSIONS` are the ways to run it: ``project`` (fp16's default:
`fused_kernels.conv_project_kernel`, the final conv's matrix product in the hidden conv's
epilogue, then `fused_kernels.tap_sum_kernel`), ``tail`` (`fused_kernels.conv_tail_kernel`,
one persistent kernel with a recomputed halo), ``off`` (the per-layer kernels, the oracle).
The functions below prepare, tune and launch them for a `CudaExecutor` (``ex``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.backends.cuda import layout, row_conv
from oidn_gpu.backends.cuda.layout import ConvLaunch
from oidn_gpu.backends.cuda.tuning import (
    DEFAULT_TAIL,
    RowsConfig,
    TailConfig,
    block_k_for,
    project_signature,
    shipped_config,
    shipped_tail,
    tail_candidates,
    tail_signature,
)
from oidn_gpu.errors import InvalidArgumentError

FUSED_ENV_VAR = "OIDN_GPU_CUDA_FUSED"  # a FUSIONS name; "off": every conv in its own kernel
# How the network's tail runs (`FusedTail`): "project" (the hidden conv with the final
# conv's matrix product in its epilogue, then a 9-tap sum with the output pass), "tail"
# (one kernel over 2D tiles with a recomputed halo), "off" (the per-layer kernels).
FUSIONS = ("project", "tail", "off")
# `project`: the per-tap partial sums in fp32 (else fp16/bf16, in the hidden value's memory).
# fp16 measured faster on an H200 (2026-12-01, 1080p: 0.495 ms against 0.604 ms fp32; the
# per-layer pair 0.553 ms), 1.3e-4 (relative L2) from the per-layer path's output.
TAIL_Z_FP32 = False
TAP_SUM_BLOCK = (8, 32)  # `tap_sum_kernel` pixels per program (rows, columns)
MAX_TAIL_CHANNELS = 64  # widest hidden activation the fused tail holds per pixel


@dataclass(frozen=True)
class FusedTail:
    """The network's last two convs and the output pass as one kernel
    (`fused_kernels.conv_tail_kernel`): ``hidden`` feeds only ``final``."""

    hidden: ConvLaunch
    final: ConvLaunch

    @property
    def name(self) -> str:
        return f"{self.hidden.name}+{self.final.name}"

    @property
    def layers(self) -> tuple[ConvLaunch, ConvLaunch]:
        return (self.hidden, self.final)


def fused_tail(launches: tuple[ConvLaunch, ...]) -> FusedTail | None:
    """The fusable tail of a network's launches: a plain full-resolution conv of at most
    `MAX_TAIL_CHANNELS` stored channels, a power of two, read only by the final conv,
    itself a plain conv of it (the OIDN U-Nets' ``dec_conv1b -> dec_conv0``); None when
    the network has none."""
    if len(launches) < 2:
        return None
    hidden, final = launches[-2], launches[-1]

    def plain(launch: ConvLaunch) -> bool:
        return len(launch.sources) == 1 and not launch.sources[0].upsample and not launch.pool

    readers = [
        launch for launch in launches if any(s.value == hidden.value for s in launch.sources)
    ]
    if not (final.final and plain(final) and plain(hidden) and readers == [final]):
        return None
    mid = hidden.out_stored
    if final.sources[0].value != hidden.value or mid > MAX_TAIL_CHANNELS or mid & (mid - 1):
        return None
    return FusedTail(hidden, final)


def fusion_of(fused: bool | str | None, precision: str = "fp16") -> str:
    """The `FUSIONS` name of the executor's ``fused`` option. None: ``OIDN_GPU_CUDA_FUSED``,
    else ``project`` for fp16 and ``off`` for bf16 (whose ``project`` keeps its partial
    sums in fp32, slower than the per-layer kernels); True: ``project``; False: ``off``."""
    if fused is None:
        fused = os.environ.get(FUSED_ENV_VAR, "") or (FUSIONS[0] if precision == "fp16" else "off")
        fused = {"on": FUSIONS[0], "1": FUSIONS[0], "0": "off"}.get(str(fused), fused)
    if fused is True or fused is False:
        return FUSIONS[0] if fused else "off"
    if fused not in FUSIONS:
        raise InvalidArgumentError(
            f"fused {fused!r} is unknown; expected a bool or one of {FUSIONS}"
        )
    return str(fused)


def z_column(tap: int, channel: int) -> int:
    """The column of ``z`` (the per-tap partial sums, 32 per pixel) that holds output
    ``channel`` (0-2) at ``tap`` (``3 * kh + kw``): taps 0-7 take 4 columns each, their
    three channels first (so `fused_kernels.tap_sum_kernel` loads each as one aligned
    vector), and tap 8's channels take the fourth column of the first three taps."""
    return 4 * tap + channel if tap < 8 else 4 * channel + 3


def project_weights(launch: ConvLaunch, params: Any, rows: int) -> np.ndarray:
    """``[rows, 32]`` float32: column `z_column` ``(t, o)`` holds the final conv's weights
    of output ``o`` at tap ``t = 3 * kh + kw`` (`fused_kernels.conv_project_kernel`)."""
    weight = np.asarray(params.weight, np.float32)  # [O, C, 3, 3]
    if weight.shape[0] > 3:
        raise ValueError(
            f"the project tail takes a final conv of at most 3 outputs, not {weight.shape[0]}"
        )
    out = np.zeros((rows, 32), np.float32)
    for t in range(9):
        for o in range(weight.shape[0]):
            out[: weight.shape[1], z_column(t, o)] = weight[o, :, t // 3, t % 3]
    return out


def prepare_project(ex: Any, prep: Any) -> None:
    """The ``project`` tail's tile and its ``z`` buffer: the hidden value's own memory
    when it is fp16/bf16 and at least 32 channels wide (nothing else writes it then)."""
    assert ex.tail is not None
    hidden = ex.tail.hidden
    key = project_signature(hidden)
    rowed = isinstance(prep.configs[hidden.name], RowsConfig)  # the row kernel's epilogue
    prep.configs[key] = (None if rowed else shipped_config(ex._capability, key)) or (
        prep.configs[hidden.name]
    )
    height, width = layout.conv_shapes(prep.plan, ex.tail.final)
    # bf16 partial sums are 8 times further from the per-layer output than fp16 ones
    # (H200, 2026-12-01, shared scenes: 9.5e-3 against 1.2e-3): fp32 for bf16
    z_fp32 = TAIL_Z_FP32 or ex.precision == "bf16"
    if not z_fp32 and hidden.out_stored >= 32:
        prep.scratch = prep.views[hidden.value].reshape(-1)[: height * width * 32]
    else:
        dtype = ex._torch.float32 if z_fp32 else ex.dtype
        prep.scratch = ex._torch.empty(height * width * 32, dtype=dtype, device=ex.device)


def tail_config(ex: Any) -> TailConfig:
    """The fused tail's tile: the tuning cache's, else the shipped one, else the default."""
    assert ex.tail is not None
    key = tail_signature(ex.tail.hidden, ex.tail.final)
    cached = ex._tuner.cached(key) if ex._tuner is not None else None
    return cached or shipped_tail(ex._capability, key) or DEFAULT_TAIL


def tail_programs(ex: Any, config: TailConfig, height: int, width: int) -> tuple[int, int, int]:
    """``(programs, tiles_w, tiles)`` of the fused tail at network size ``height x width``."""
    tiles_w = -(-width // (config.region_w - 2))
    tiles = tiles_w * -(-height // (config.region_h - 2))
    if ex.device.type == "cuda":
        sms = ex._torch.cuda.get_device_properties(ex.device).multi_processor_count
    else:
        sms = 2  # the interpreter: a few programs, each over several tiles
    return min(tiles, sms * config.per_sm), tiles_w, tiles


def set_tail_config(ex: Any, prep: Any, config: TailConfig) -> None:
    """Use ``config`` for the fused tail of ``prep`` (its scratch sized to fit)."""
    assert ex.tail is not None
    height, width = layout.conv_shapes(prep.plan, ex.tail.final)
    programs = tail_programs(ex, config, height, width)[0]
    size = programs * config.region_h * config.region_w * ex.tail.hidden.out_stored
    if prep.scratch is None or prep.scratch.numel() < size:
        prep.scratch = ex._torch.empty(size, dtype=ex.dtype, device=ex.device)
    prep.tail = config


def tune_tail(ex: Any, prep: Any, target: Any) -> None:
    import triton.testing

    assert ex.tail is not None and ex._tuner is not None

    def time_ms(config: TailConfig) -> float:
        set_tail_config(ex, prep, config)
        launch_tail(ex, prep, config, target)
        ex._torch.cuda.synchronize(ex.device)
        return float(
            triton.testing.do_bench(
                lambda: launch_tail(ex, prep, config, target),
                warmup=5,
                rep=25,
                return_mode="median",
            )
        )

    key = tail_signature(ex.tail.hidden, ex.tail.final)
    set_tail_config(ex, prep, ex._tuner.choose(key, tail_candidates(), time_ms))


def launch_tail(ex: Any, prep: Any, config: TailConfig, target: Any) -> None:
    assert ex.tail is not None
    hidden, final = ex.tail.layers
    height, width = layout.conv_shapes(prep.plan, final)
    programs, tiles_w, tiles = tail_programs(ex, config, height, width)
    source = hidden.sources[0]
    w1, b1 = ex._weights[hidden.name]
    w2, b2 = ex._weights[final.name]
    block_k1, taps1 = block_k_for(config.block_k1, source.stored)
    block_k2, taps2 = block_k_for(config.block_k2, hidden.out_stored)
    final_args, flags = ex._final_args(target)
    ex.fused_kernels().conv_tail_kernel[(programs,)](
        prep.views[source.value],
        w1,
        b1,
        w2,
        b2,
        prep.scratch,
        target.image,
        height,
        width,
        source.stored,
        hidden.a_tap_rows,
        hidden.weight_cols,
        final.a_tap_rows,
        final.weight_cols,
        tiles_w,
        tiles,
        *final_args,
        RELU1=hidden.relu,
        RELU2=final.relu,
        REGION_H=config.region_h,
        REGION_W=config.region_w,
        BLOCK_M=config.block_m,
        MID=hidden.out_stored,
        BLOCK_K1=block_k1,
        TAPS1=taps1,
        BLOCK_K2=block_k2,
        TAPS2=taps2,
        num_warps=config.num_warps,
        num_stages=config.num_stages,
        **flags,
    )


def launch_project(ex: Any, prep: Any, target: Any) -> None:
    assert ex.tail is not None
    hidden, final = ex.tail.layers
    height, width = layout.conv_shapes(prep.plan, final)
    config = prep.configs[project_signature(hidden)]
    source = hidden.sources[0]
    weight, bias = ex._weights[hidden.name]
    proj, final_bias = ex._weights["project"]
    if isinstance(config, RowsConfig):
        row_conv.launch(ex, prep, hidden, config, project=True)
    else:
        block_k, taps = block_k_for(config.block_k, source.stored)
        ex.fused_kernels().conv_project_kernel[(-(-height * width // config.block_m),)](
            prep.views[source.value],
            weight,
            bias,
            proj,
            prep.scratch,
            height,
            width,
            source.stored,
            hidden.a_tap_rows,
            hidden.weight_cols,
            RELU=hidden.relu,
            MID=hidden.out_stored,
            BLOCK_M=config.block_m,
            BLOCK_K=block_k,
            TAPS=taps,
            num_warps=config.num_warps,
            num_stages=config.num_stages,
        )
    final_args, flags = ex._final_args(target)
    rows, cols = TAP_SUM_BLOCK
    ex.fused_kernels().tap_sum_kernel[(-(-width // cols), -(-height // rows))](
        prep.scratch,
        final_bias,
        target.image,
        height,
        width,
        *final_args,
        RELU=final.relu,
        BLOCK_H=rows,
        BLOCK_W=cols,
        num_warps=4,
        **flags,
    )


def row_launches(ex: Any, prep: Any) -> list[tuple[str, ConvLaunch, bool]]:
    """``(configs key, conv, project)`` of each row-kernel launch of a frame of ``prep``
    (`row_conv.balance`): the convs of ``ex.steps`` on the row kernel, and the ``project``
    tail's hidden conv under its own key."""
    found = []
    for step in ex.steps:
        if isinstance(step, FusedTail):
            key = project_signature(step.hidden)
            if ex.fusion == "project" and isinstance(prep.configs.get(key), RowsConfig):
                found.append((key, step.hidden, True))
        elif isinstance(prep.configs.get(step.name), RowsConfig):
            found.append((step.name, step, False))
    return found
