"""Snapshot tests of generated WGSL for a few representative specs, and determinism.

Set ``OIDN_GPU_UPDATE_SNAPSHOTS=1`` to rewrite ``tests/data/snapshots/*.wgsl``
after an intended change; review the diff like code.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oidn_gpu.image.transfer import Transfer
from oidn_gpu.kernels import conv_direct, conv_igemm, final_rgb, io_passes, pool
from oidn_gpu.kernels.gemm import FinalLayer, GemmOptions, PoolLayout
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, DeviceLimits, Kernel, PoolSpec, Precision

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"


def _cases() -> dict[str, object]:
    return {
        "conv_direct_fp32_pool": lambda: conv_direct.generate(
            ConvSpec.simple(9, 32, Precision.FP32, pool=True)
        ),
        "conv_igemm_fp16_default": lambda: conv_igemm.generate(
            ConvSpec.simple(32, 64, Precision.FP16)
        ),
        "conv_igemm_fp32_decoder_base_offset": lambda: conv_igemm.generate(
            ConvSpec((ConvSource(96, True), ConvSource(64)), 64, Precision.FP32),
            GemmOptions(address_mode="base-offset", decoder_load="source-first", rows_per_thread=4),
        ),
        "final_rgb_fp16_shared_weights": lambda: final_rgb.generate(
            ConvSpec.simple(32, 3, Precision.FP16, relu=False, out_precision=Precision.FP32),
            FinalLayer.SHARED_INPUT_WEIGHTS,
        ),
        # the H200's 48 KiB hold 4 pixels per invocation in a padded patch
        "final_rgb_fp16_4_pixels_padded": lambda: final_rgb.generate(
            ConvSpec.simple(32, 3, Precision.FP16, relu=False, out_precision=Precision.FP32),
            FinalLayer.SHARED_AUTO,
            DeviceLimits(max_workgroup_storage_bytes=49152, shader_f16=True),
            pixels=4,
            patch="padded",
        ),
        "max_pool_fp16_channels": lambda: pool.generate(
            PoolSpec(64, Precision.FP16), PoolLayout.CHANNELS
        ),
        "input_pass_fp16_pu_3img": lambda: io_passes.generate_input_pass(
            io_passes.InputPassSpec(tuple(io_passes.ImageRole), Precision.FP16, Transfer.PU, True)
        ),
        "output_pass_fp32_srgb": lambda: io_passes.generate_output_pass(
            io_passes.OutputPassSpec(Transfer.SRGB)
        ),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_snapshot(name: str) -> None:
    kernel: Kernel = _cases()[name]()  # type: ignore[operator]
    path = SNAPSHOTS / f"{name}.wgsl"
    if os.environ.get("OIDN_GPU_UPDATE_SNAPSHOTS") == "1":
        SNAPSHOTS.mkdir(parents=True, exist_ok=True)
        path.write_text(kernel.source)
    assert path.exists(), f"missing snapshot {path}; run with OIDN_GPU_UPDATE_SNAPSHOTS=1"
    assert kernel.source == path.read_text(), f"{name} changed; review and update the snapshot"


@pytest.mark.parametrize("name", sorted(_cases()))
def test_deterministic(name: str) -> None:
    make = _cases()[name]
    a, b = make(), make()  # type: ignore[operator]
    assert a.source == b.source and a.key == b.key
    assert a.source.startswith("// oidn_gpu.kernels.")
    assert "\n\n\n" not in a.source
