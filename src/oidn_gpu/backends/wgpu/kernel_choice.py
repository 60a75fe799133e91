"""The executor's bridge to `oidn_gpu.kernels`: specs per node, kernel choice, weight packing.

Everything the wgpu executor needs from the generators goes through here, so
the executor does not depend on which generator families exist:

- `node_spec`: the `ConvSpec` / `PoolSpec` of a graph node (the final conv
  writes fp32, everything else the executor precision);
- `kernel_for_node`: ``kernels.select.select_conv(spec, limits, kernel=, gemm=)``
  for convolutions (with ``gemm.for_layer``: the first conv's and the final layer's accumulation),
  ``select_pool`` for stand-alone pools;
- `pack_conv`: packs a conv's weights in the layout its kernel reads;
- `device_limits`: the device's `Capabilities` as the kernels' `DeviceLimits`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.gpu_device import Capabilities
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.graph import ir
from oidn_gpu.kernels import select, weights
from oidn_gpu.kernels import spec as kspec
from oidn_gpu.kernels.gemm import GemmOptions, default_options
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, Kernel, PoolSpec, Precision


def kernel_names() -> tuple[str, ...]:
    """Accepted ``kernel=`` settings (the final RGB layer is chosen, never asked for)."""
    return (select.KernelKind.AUTO.value, *select.CONV_KERNELS)


def validate_kernel(kernel: str) -> str:
    """Raise `InvalidArgumentError` unless ``kernel`` is a known setting (the one check of
    the ``kernel`` option: `WgpuOptions` makes it)."""
    names = kernel_names()
    if not isinstance(kernel, str) or kernel not in names:
        expected = ", ".join(repr(n) for n in names)
        raise InvalidArgumentError(f"unknown kernel {kernel!r}; expected one of {expected}")
    return kernel


def validate_gemm(gemm: Any) -> GemmOptions | None:
    """Normalize GEMM options: None, a mapping of option names, or `GemmOptions` (the one
    check of the ``gemm`` option: `WgpuOptions` makes it).

    Raises:
        InvalidArgumentError: an unknown option name or an invalid value.
    """
    if gemm is None or isinstance(gemm, GemmOptions):
        return gemm
    if not isinstance(gemm, Mapping):
        raise InvalidArgumentError(
            f"gemm must be a mapping of option names or GemmOptions, got {type(gemm).__name__}"
        )
    try:
        return GemmOptions(**gemm)
    except TypeError as err:
        raise InvalidArgumentError(f"invalid gemm options {dict(gemm)!r}: {err}") from None


def device_limits(caps: Capabilities) -> kspec.DeviceLimits:
    x, y, z = caps.max_compute_workgroup_size
    return kspec.DeviceLimits(
        max_workgroup_storage_bytes=caps.max_compute_workgroup_storage_size,
        max_invocations_per_workgroup=caps.max_compute_invocations_per_workgroup,
        max_workgroup_size_x=x,
        max_workgroup_size_y=y,
        max_workgroup_size_z=z,
        max_workgroups_per_dimension=caps.max_compute_workgroups_per_dimension,
        shader_f16=caps.has_f16,
        subgroups=caps.has_subgroups,
        subgroup_min_size=caps.subgroup_min_size or 4,
        subgroup_max_size=caps.subgroup_max_size or 128,
        large_gpu=is_large_gpu(caps),
    )


# A "large GPU" takes the GEMM defaults tuned on an NVIDIA H200 (`kernels.gemm.default_options`):
# a discrete adapter with at least this much workgroup memory and these many invocations.
LARGE_GPU_MIN_WORKGROUP_STORAGE = 32768
LARGE_GPU_MIN_INVOCATIONS = 1024


def is_large_gpu(caps: Capabilities) -> bool:
    """True for a discrete GPU with large compute limits (never for CPU adapters)."""
    return (
        caps.adapter.is_discrete
        and caps.max_compute_workgroup_storage_size >= LARGE_GPU_MIN_WORKGROUP_STORAGE
        and caps.max_compute_invocations_per_workgroup >= LARGE_GPU_MIN_INVOCATIONS
    )


def conv_of(node: ir.Node) -> ir.Conv | None:
    if isinstance(node, ir.Conv):
        return node
    if isinstance(node, (ir.ConvPool, ir.DecoderConv)):
        return node.conv
    return None


def node_spec(graph: ir.Graph, node: ir.Node, precision: Precision, *, final: bool) -> Any:
    """The generator spec of one optimized-graph node.

    Raises:
        InvalidOperationError: the node kind has no GPU kernel (unfused upsample/concat).
    """
    out_precision = Precision.FP32 if final else precision
    if isinstance(node, ir.Conv):
        return ConvSpec(
            (ConvSource(graph.channels(node.input)),),
            node.out_channels,
            precision,
            relu=node.activation is ir.Activation.RELU,
            out_precision=out_precision,
        )
    if isinstance(node, ir.ConvPool):
        conv = node.conv
        return ConvSpec(
            (ConvSource(graph.channels(conv.input)),),
            conv.out_channels,
            precision,
            relu=conv.activation is ir.Activation.RELU,
            pool=True,
            out_precision=out_precision,
        )
    if isinstance(node, ir.DecoderConv):
        conv = node.conv
        return ConvSpec(
            tuple(ConvSource(s.channels, s.upsample) for s in node.sources),
            conv.out_channels,
            precision,
            relu=conv.activation is ir.Activation.RELU,
            out_precision=out_precision,
        )
    if isinstance(node, ir.Pool):
        return PoolSpec(node.channels, precision)
    raise InvalidOperationError(
        f"the wgpu backend has no kernel for a stand-alone {type(node).__name__} node "
        f"'{node.name}'; enable decoder fusion"
    )


def is_input_conv(graph: ir.Graph, node: ir.Node) -> bool:
    """Whether ``node`` is a conv (plain or with a fused pool) that reads only the network
    input (the U-Net's first conv)."""
    return isinstance(node, (ir.Conv, ir.ConvPool)) and tuple(node.inputs) == (graph.input,)


@dataclass(frozen=True)
class Chosen:
    """The spec and kernel of one node; ``fallback_reason`` when a preference was not met."""

    spec: Any
    kernel: Kernel
    fallback_reason: str | None = None


def kernel_for_node(
    graph: ir.Graph,
    node: ir.Node,
    *,
    precision: Precision,
    final: bool,
    limits: kspec.DeviceLimits,
    kernel: str = "auto",
    gemm: Any = None,
) -> Chosen:
    """Choose and generate the kernel of one node (with ``gemm.for_layer``: the first conv
    and the final layer may have their own accumulation)."""
    spec = node_spec(graph, node, precision, final=final)
    if gemm is None:
        gemm = default_options(limits, precision)
    gemm = gemm.for_layer(is_input_conv(graph, node), final)
    if isinstance(spec, PoolSpec):
        return Chosen(spec, select.select_pool(spec, limits, kernel=kernel, gemm=gemm))
    selection = select.select_conv(spec, limits, kernel=kernel, gemm=gemm, final=final)
    return Chosen(spec, selection.kernel, selection.fallback_reason)


def pack_conv(spec: ConvSpec, kernel: Kernel, weight: Any, bias: Any) -> Any:
    """Pack weights/bias in the layout (and per output parity) as ``kernel`` reads them."""
    layout = kernel.weight_layout or kspec.WeightLayout.OUTPUT_MAJOR
    return weights.pack_conv(spec, weight, bias, layout, parity=kernel.parity_weights)
