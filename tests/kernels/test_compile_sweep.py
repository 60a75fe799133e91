"""Every generated kernel of a broad spec sweep passes wgpu validation on the test device.

Each kernel is compiled with ``create_shader_module`` (compilation info must
hold no error) and ``create_compute_pipeline`` with an explicit layout built
from ``Kernel.bindings``, so the binding table and the WGSL declarations must
agree. No dispatch, so lavapipe's JIT is not paid here.
"""

from __future__ import annotations

import pytest

from oidn_gpu.image.transfer import Transfer
from oidn_gpu.kernels import (
    conv_direct,
    conv_igemm,
    conv_spatial,
    conv_subgroup,
    final_rgb,
    gemm,
    io_passes,
    pool,
)
from oidn_gpu.kernels.gemm import FinalLayer, FinalPatch, GemmOptions, PoolLayout
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, Kernel, PoolSpec, Precision

from . import gpu_runner

pytestmark = pytest.mark.gpu


def _conv_specs(p: Precision) -> list[ConvSpec]:
    return [
        ConvSpec.simple(3, 32, p),
        ConvSpec.simple(9, 32, p, pool=True),
        ConvSpec.simple(73, 13, p, relu=False),
        ConvSpec((ConvSource(96, True), ConvSource(64)), 64, p),
        ConvSpec((ConvSource(5, True), ConvSource(3)), 7, p, relu=False),
        ConvSpec.simple(32, 3, p, relu=False, out_precision=Precision.FP32),
    ]


def _sweep(limits) -> list[Kernel]:
    kernels: list[Kernel] = []
    option_sets = [GemmOptions()]
    for name, values in gemm.option_values().items():
        if name in ("input_accumulation", "final_accumulation"):
            continue  # `GemmOptions.for_layer` turns them into another layer's accumulation
        for v in values:
            option_sets.append(GemmOptions(**{name: v}))
    for p in Precision:
        for spec in _conv_specs(p):
            kernels.append(conv_direct.generate(spec))
            if not spec.pool:
                kernels.append(conv_subgroup.generate(spec))
                if conv_spatial.storage_bytes(spec) <= limits.max_workgroup_storage_bytes:
                    kernels.append(conv_spatial.generate(spec))
            for opts in option_sets:
                if opts.fits(p, limits):
                    kernels.append(conv_igemm.generate(spec, opts, limits))
            if final_rgb.supports(spec):
                kernels += [
                    final_rgb.generate(spec, m, limits, pixels=n, patch=patch)
                    for m in FinalLayer
                    for n in gemm.FINAL_PIXELS
                    for patch in FinalPatch
                ]
        for layout in PoolLayout:
            kernels.append(pool.generate(PoolSpec(13, p), layout, limits))
        kernels.append(io_passes.generate_input_pack(io_passes.PackSpec(9, p)))
        kernels.append(io_passes.generate_output_unpack(io_passes.PackSpec(3, p)))
        for t in Transfer:
            for roles in [(io_passes.ImageRole.MAIN,), tuple(io_passes.ImageRole)]:
                for hdr, snorm in [(False, False), (True, False), (False, True)]:
                    kernels.append(
                        io_passes.generate_input_pass(
                            io_passes.InputPassSpec(roles, p, t, hdr, snorm)
                        )
                    )
            kernels.append(
                io_passes.generate_output_pass(io_passes.OutputPassSpec(t, True, False, p))
            )
            kernels.append(
                io_passes.generate_output_pass(io_passes.OutputPassSpec(t, False, True, p))
            )
    unique = {k.key: k for k in kernels}
    return list(unique.values())


def _validate(kernel: Kernel) -> None:
    import wgpu

    dev = gpu_runner.device()
    module = dev.create_shader_module(label=kernel.key, code=kernel.source)
    errors = [m for m in module.get_compilation_info() if getattr(m, "type", "") == "error"]
    assert not errors, f"{kernel.key}: {errors}"
    layout = dev.create_bind_group_layout(
        entries=[
            {
                "binding": b.index,
                "visibility": wgpu.ShaderStage.COMPUTE,
                "buffer": {"type": b.kind.value},
            }
            for b in kernel.bindings
        ]
    )
    dev.create_compute_pipeline(
        layout=dev.create_pipeline_layout(bind_group_layouts=[layout]),
        compute={"module": module, "entry_point": kernel.entry_point},
    )


def test_compile_whole_sweep(limits) -> None:
    kernels = _sweep(limits)
    assert len(kernels) > 300
    failures = []
    for kernel in kernels:
        try:
            _validate(kernel)
        except Exception as err:  # collect all, report together
            failures.append(f"{kernel.key}: {str(err)[-400:]}")
    assert not failures, "\n".join(failures[:5]) + f"\n({len(failures)} failures)"


def test_storage_fits_declared(limits) -> None:
    for kernel in _sweep(limits):
        assert kernel.workgroup_storage_bytes <= limits.max_workgroup_storage_bytes, kernel.key
