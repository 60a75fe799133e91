"""The specialized final layer: a conv to at most 4 channels (RGB) with an fp32 output.

The last conv of a U-Net has one output block and reads the decoder's widest
tensor, so the GEMM tile wastes most of its N dimension. This kernel is the
spatial halo conv (`conv_spatial`) with one output block: a workgroup of 8x8
pixels stages its 10x10 input patch (all IB blocks) in workgroup memory and,
for ``FinalLayer.SHARED_INPUT_WEIGHTS``, the ``9 * IB * 4`` weight vec4s as well.
``SHARED_AUTO`` caches the weights when both fit the device; ``SHARED_INPUT``
never does; ``DIRECT`` is `conv_direct`. fp16 partials: 4 products per input
vec4, as in every direct-family kernel. The output is fp32 whatever the
network precision (``spec.out_precision`` must be FP32).

Bindings, params and grid: as every conv (see `kernels`); weights
output-major (identical to k-major for one output block).
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import conv_direct, conv_spatial
from oidn_gpu.kernels.gemm import FinalLayer
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Kernel, Precision

FAMILY = "conv-final-rgb"


def supports(spec: ConvSpec) -> bool:
    """True for a plain (single source, no upsample, no pool) conv to <= 4 channels in fp32 out."""
    return (
        spec.out_blocks == 1
        and len(spec.sources) == 1
        and not spec.sources[0].upsample
        and not spec.pool
        and spec.out_precision is Precision.FP32
    )


def resolve(spec: ConvSpec, mode: FinalLayer, limits: DeviceLimits) -> FinalLayer:
    """The variant `generate` uses: SHARED_AUTO picks by ``limits``; DIRECT when nothing fits."""
    mode = FinalLayer(mode)
    cap = limits.max_workgroup_storage_bytes
    if mode is FinalLayer.SHARED_AUTO:
        if conv_spatial.storage_bytes(spec, True) <= cap:
            return FinalLayer.SHARED_INPUT_WEIGHTS
        mode = FinalLayer.SHARED_INPUT
    if mode is FinalLayer.SHARED_INPUT_WEIGHTS and conv_spatial.storage_bytes(spec, True) > cap:
        return (
            FinalLayer.SHARED_INPUT
            if conv_spatial.storage_bytes(spec) <= cap
            else FinalLayer.DIRECT
        )
    if mode is FinalLayer.SHARED_INPUT and conv_spatial.storage_bytes(spec) > cap:
        return FinalLayer.DIRECT
    return mode


def generate(
    spec: ConvSpec,
    mode: FinalLayer = FinalLayer.SHARED_AUTO,
    limits: DeviceLimits | None = None,
) -> Kernel:
    """Generate the final-layer kernel for ``spec`` in ``mode`` (with fallbacks when too big)."""
    if not supports(spec):
        raise InvalidArgumentError(
            "the final RGB kernel needs one plain source, <= 4 output channels and an fp32 output"
        )
    chosen = resolve(spec, mode, limits or DeviceLimits())
    if chosen is FinalLayer.DIRECT:
        return conv_direct.generate(spec)
    return conv_spatial.generate(
        spec, cache_weights=chosen is FinalLayer.SHARED_INPUT_WEIGHTS, family=FAMILY
    )
