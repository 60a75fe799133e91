"""The executor's nodes: one kernel per fused graph node, and the packed weights it reads.

`build_nodes` chooses each node's kernel once, independent of the input shape
(`kernel_choice.kernel_for_node`), and records its FLOPs per output pixel and,
when a requested kernel could not run there, why. `upload_weights` packs every
conv's weights and bias in the layout its kernel reads and uploads them once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from oidn_gpu.backends.gpu_device import BufferUsage, Capabilities, GpuDevice
from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.graph import ir
from oidn_gpu.kernels.spec import Kernel, Precision, WeightLayout

# A 3x3 conv does one multiply-add (2 FLOPs) per input channel, output channel and tap.
CONV_TAPS = 9
# A pooled output pixel covers 2x2 conv output pixels.
POOL_PIXELS = 4


@dataclass
class Node:
    """One executable node: kernel, weights and what it reads."""

    name: str
    kind: str
    kernel: Kernel
    inputs: tuple[str, ...]
    conv: str | None
    flops_per_out_pixel: float
    spec: Any = None
    fallback_reason: str | None = None
    weights: Any = None
    bias: Any = None


def build_nodes(
    graph: ir.Graph,
    capabilities: Capabilities,
    *,
    precision: Precision,
    kernel: str,
    gemm: Any,
    on_kernel: Callable[[Kernel], Any] | None = None,
) -> list[Node]:
    """The kernel of every node of ``graph`` (already fused), in execution order;
    ``on_kernel`` is called with each kernel as soon as it is generated (to start compiling
    it while the next ones are generated)."""
    limits = kernel_choice.device_limits(capabilities)
    nodes: list[Node] = []
    for node in graph.nodes:
        final = node.name == graph.output
        chosen = kernel_choice.kernel_for_node(
            graph, node, precision=precision, final=final, limits=limits, kernel=kernel, gemm=gemm
        )
        if on_kernel is not None:
            on_kernel(chosen.kernel)
        conv = kernel_choice.conv_of(node)
        flops = 0.0
        if conv is not None:
            flops = 2.0 * conv.in_channels * conv.out_channels * CONV_TAPS
            if isinstance(node, ir.ConvPool):
                flops *= POOL_PIXELS
        nodes.append(
            Node(
                name=node.name,
                kind=type(node).__name__,
                kernel=chosen.kernel,
                inputs=tuple(node.inputs),
                conv=conv.name if conv is not None else None,
                flops_per_out_pixel=flops,
                spec=chosen.spec,
                fallback_reason=chosen.fallback_reason,
            )
        )
    return nodes


@dataclass(frozen=True)
class WeightBuffers:
    """The uploaded weights of one conv: its buffers and the layout its kernel reads."""

    weights: Any
    bias: Any
    layout: WeightLayout | None
    precision: Precision


def weight_buffers(nodes: list[Node]) -> dict[str, WeightBuffers]:
    """Conv name -> its uploaded `WeightBuffers`, in execution order."""
    return {
        n.conv: WeightBuffers(n.weights, n.bias, n.kernel.weight_layout, n.kernel.precision)
        for n in nodes
        if n.conv is not None and n.weights is not None
    }


def fallbacks(nodes: list[Node]) -> dict[str, str]:
    """Layer -> why its kernel is not the one asked for."""
    return {n.name: n.fallback_reason for n in nodes if n.fallback_reason}


def upload_weights(
    nodes: list[Node],
    convs: Mapping[str, Any],
    device: GpuDevice,
    precision: Precision,
    track: Callable[[Any], Any],
) -> None:
    """Pack and upload the weights and bias of every conv node (``track`` owns the buffers)."""
    for node in nodes:
        if node.conv is None:
            continue
        weights = convs[node.conv]
        packed = kernel_choice.pack_conv(node.spec, node.kernel, weights.weight, weights.bias)
        node.weights = track(
            device.create_buffer_with_data(
                f"oidn/{node.conv}/weights/{precision.value}", packed.weights, BufferUsage.STORAGE
            )
        )
        node.bias = track(
            device.create_buffer_with_data(
                f"oidn/{node.conv}/bias", packed.bias, BufferUsage.STORAGE
            )
        )
