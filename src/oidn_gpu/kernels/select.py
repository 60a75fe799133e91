"""Kernel choice by shape, precision and device limits (oidn-web's ``auto``), or forced.

`select_conv` returns a `Selection` (the chosen `KernelKind`, the `Kernel`
and, when a forced or preferred choice could not be used, the reason).

Rules:

- fp16 needs ``limits.shader_f16`` (else `UnsupportedDeviceError`);
  `select_precision("auto", limits)` picks fp16 when available.
- The final layer (``final=True``: one output block, fp32 output, plain
  source) under ``auto`` or ``implicit-gemm`` uses `final_rgb` with
  ``gemm.final_layer``, ``gemm.final_pixels`` and ``gemm.final_patch`` (DIRECT ->
  `conv_direct`).
- ``gemm=None``: `gemm.default_options(limits, precision)` (`GemmOptions()`, or the
  large-GPU defaults when ``limits.large_gpu``).
- ``auto``: implicit GEMM when the GEMM tile fits the limits (with a fused pool
  and 2 rows per thread, its half-quad exchange too); otherwise direct.
- forced ``implicit-gemm``: as auto, falling back to direct.
- forced ``spatial``: the halo kernel when there is no fused pool and its
  workgroup memory fits; otherwise direct.
- forced ``subgroup``: when the device has subgroups and there is no fused
  pool; otherwise direct.
- forced ``direct``: always.
- ``gemm.accumulation``: the implicit-GEMM kernels sum fp16 products as it says; the
  direct, spatial, subgroup and final-layer kernels sum in f32 when it is ``f32`` and
  otherwise in f16 partials of 4 products (one input vec4). With ``final=True``,
  ``gemm.final_accumulation`` replaces it where set.

`select_pool` picks the max-pool layout from ``gemm.pool_layout`` when the
kernel setting is ``auto``/``implicit-gemm`` (spatial otherwise), as oidn-web does.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from oidn_gpu.errors import InvalidArgumentError, UnsupportedDeviceError
from oidn_gpu.kernels import conv_direct, conv_igemm, conv_spatial, conv_subgroup, final_rgb, pool
from oidn_gpu.kernels.gemm import (
    Accumulation,
    FinalLayer,
    GemmOptions,
    PoolLayout,
    default_options,
)
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Kernel, PoolSpec, Precision


class KernelKind(enum.Enum):
    """Conv kernel setting (``AUTO``) or choice."""

    AUTO = "auto"
    DIRECT = "direct"
    IMPLICIT_GEMM = "implicit-gemm"
    SPATIAL = "spatial"
    SUBGROUP = "subgroup"
    FINAL_RGB = "final-rgb"


# The conv kernel families a caller can ask for (``kernel=``), by name: the one list.
CONV_KERNELS = tuple(
    k.value for k in KernelKind if k not in (KernelKind.AUTO, KernelKind.FINAL_RGB)
)
# The forms a fused conv+pool has.
POOL_CONV_KERNELS = (KernelKind.DIRECT.value, KernelKind.IMPLICIT_GEMM.value)


def _kind(value: KernelKind | str) -> KernelKind:
    try:
        kind = KernelKind(value)
    except ValueError:
        allowed = ", ".join(repr(k.value) for k in KernelKind if k is not KernelKind.FINAL_RGB)
        raise InvalidArgumentError(f"invalid kernel={value!r}; allowed values: {allowed}") from None
    if kind is KernelKind.FINAL_RGB:
        raise InvalidArgumentError("kernel='final-rgb' is chosen automatically for the final layer")
    return kind


@dataclass(frozen=True)
class Selection:
    """The result of `select_conv`."""

    kind: KernelKind
    kernel: Kernel
    fallback_reason: str | None = None


def select_precision(precision: Precision | str, limits: DeviceLimits) -> Precision:
    """Resolve ``"auto"`` (fp16 when the device has shader-f16) and check fp16 support.

    The one precision check: the wgpu executor and every kernel choice use it.

    Raises:
        InvalidArgumentError: an unknown value.
        UnsupportedDeviceError: fp16 asked for on a device without shader-f16.
    """
    if isinstance(precision, str) and precision == "auto":
        return Precision.FP16 if limits.shader_f16 else Precision.FP32
    try:
        p = Precision(precision)
    except ValueError:
        raise InvalidArgumentError(
            f"unknown precision {precision!r}; expected 'auto', 'fp16' or 'fp32'"
        ) from None
    if p is Precision.FP16 and not limits.shader_f16:
        raise UnsupportedDeviceError(
            "fp16 precision needs the 'shader-f16' feature, which this device lacks; "
            "use precision='fp32' or 'auto'"
        )
    return p


def _gemm_problem(spec: ConvSpec, gemm: GemmOptions, limits: DeviceLimits) -> str | None:
    problems = gemm.problems(spec.precision, limits)
    if problems:
        return "the GEMM tile does not fit: " + "; ".join(problems)
    try:
        conv_igemm.validate(spec, gemm, limits)
    except UnsupportedDeviceError as err:  # the resolved tile (policy, pool exchange)
        return str(err)
    return None


def select_conv(
    spec: ConvSpec,
    limits: DeviceLimits,
    kernel: KernelKind | str = KernelKind.AUTO,
    gemm: GemmOptions | None = None,
    final: bool = False,
) -> Selection:
    """Choose and generate the conv kernel for ``spec`` (see module doc)."""
    kind = _kind(kernel)
    # the final layer's own accumulation (the first conv's is the caller's to apply:
    # `GemmOptions.for_layer`)
    gemm = (gemm or default_options(limits, spec.precision)).for_layer(False, final)
    select_precision(spec.precision, limits)
    f32 = gemm.accumulation is Accumulation.F32  # the direct families sum in f32 too
    if final and kind in (KernelKind.AUTO, KernelKind.IMPLICIT_GEMM) and final_rgb.supports(spec):
        if gemm.final_layer is FinalLayer.DIRECT:
            return Selection(KernelKind.DIRECT, conv_direct.generate(spec, f32))
        k = final_rgb.generate(
            spec,
            gemm.final_layer,
            limits,
            pixels=gemm.final_pixels,
            patch=gemm.final_patch,
            f32_sum=f32,
        )
        chosen = KernelKind.FINAL_RGB if k.name == final_rgb.FAMILY else KernelKind.DIRECT
        return Selection(
            chosen, k, None if chosen is KernelKind.FINAL_RGB else "final tile does not fit"
        )
    if kind in (KernelKind.AUTO, KernelKind.IMPLICIT_GEMM):
        problem = _gemm_problem(spec, gemm, limits)
        if problem is None:
            return Selection(KernelKind.IMPLICIT_GEMM, conv_igemm.generate(spec, gemm, limits))
        return Selection(KernelKind.DIRECT, conv_direct.generate(spec, f32), problem)
    if kind is KernelKind.SPATIAL:
        if spec.pool:
            return Selection(
                KernelKind.DIRECT, conv_direct.generate(spec, f32), "spatial has no fused pool"
            )
        if conv_spatial.storage_bytes(spec) > conv_spatial.storage_cap(limits):
            return Selection(
                KernelKind.DIRECT, conv_direct.generate(spec, f32), "the halo patch does not fit"
            )
        return Selection(KernelKind.SPATIAL, conv_spatial.generate(spec, f32_sum=f32))
    if kind is KernelKind.SUBGROUP:
        if not limits.subgroups:
            return Selection(
                KernelKind.DIRECT, conv_direct.generate(spec, f32), "no subgroup support"
            )
        if spec.pool:
            return Selection(
                KernelKind.DIRECT, conv_direct.generate(spec, f32), "subgroup has no fused pool"
            )
        return Selection(KernelKind.SUBGROUP, conv_subgroup.generate(spec, f32))
    return Selection(KernelKind.DIRECT, conv_direct.generate(spec, f32))


def generate_form(
    spec: ConvSpec,
    kernel: str,
    options: GemmOptions | None,
    limits: DeviceLimits | None,
    *,
    kinds: tuple[str, ...],
    error: str,
) -> Kernel:
    """Generate ``spec`` in the form ``kernel`` (one of ``kinds``), without fallback.

    The entry points `conv_pool.generate` and `decoder.generate` use this; ``error``
    is the `InvalidArgumentError` message for a ``kernel`` not in ``kinds``.
    """
    if kernel not in kinds:
        raise InvalidArgumentError(error)
    f32 = (options or GemmOptions()).accumulation is Accumulation.F32
    if kernel == "direct":
        return conv_direct.generate(spec, f32)
    if kernel == "implicit-gemm":
        return conv_igemm.generate(spec, options, limits)
    if kernel == "spatial":
        return conv_spatial.generate(spec, f32_sum=f32)
    if kernel == "subgroup":
        return conv_subgroup.generate(spec, f32)
    raise InvalidArgumentError(error)


def select_pool(
    spec: PoolSpec,
    limits: DeviceLimits,
    kernel: KernelKind | str = KernelKind.AUTO,
    gemm: GemmOptions | None = None,
) -> Kernel:
    """The stand-alone max pool: ``gemm.pool_layout`` under auto/implicit-gemm, else SPATIAL."""
    kind = _kind(kernel)
    gemm = gemm or default_options(limits, spec.precision)
    select_precision(spec.precision, limits)
    layout = (
        gemm.pool_layout
        if kind in (KernelKind.AUTO, KernelKind.IMPLICIT_GEMM)
        else PoolLayout.SPATIAL
    )
    return pool.generate(spec, layout, limits)
