"""The specialized final layer: a conv to at most 4 channels (RGB) with an fp32 output.

The last conv of a U-Net has one output block and reads the decoder's widest
tensor, so the GEMM tile wastes most of its N dimension. This kernel is the
spatial halo conv (`conv_spatial`) with one output block: a workgroup of 8x8
invocations stages its input patch (all IB blocks) in workgroup memory and,
for ``FinalLayer.SHARED_INPUT_WEIGHTS``, the ``9 * IB * 4`` weight vec4s as well.
``SHARED_AUTO`` caches the weights when both fit the device; ``SHARED_INPUT``
never does; ``DIRECT`` is `conv_direct`. fp16 sums as in every direct-family
kernel: in f32 with ``f32_sum`` (the accumulation ``f32``), else f16 partials of 4
products per input vec4. The output is fp32 whatever the
network precision (``spec.out_precision`` must be FP32).

``GemmOptions.final_pixels`` (1, 2 or 4) gives each invocation that many output
pixels, 8 apart along x, so the workgroup covers ``8 P x 8`` pixels and stages a
``(8 P + 2) x 10`` patch; each weight vec4 read then feeds P pixels.
``GemmOptions.final_patch`` PADDED spreads the patch over the workgroup-memory
banks (`conv_spatial.patch_layout`). Neither
changes any pixel's summation (see `conv_spatial`), so every variant gives the
same bits. `resolve` picks the variant that fits the device's workgroup storage
(at most `gemm_tile.MAX_TILE_STORAGE_BYTES`): the asked pixels with cached weights,
then without them (``SHARED_AUTO`` only), then half the pixels, down to one pixel;
``DIRECT`` when not even that fits. ``SHARED_INPUT_WEIGHTS`` never drops the cached
weights: it falls back to ``DIRECT``, as oidn-webgpu's ``finalLayer``
does (``nativeUNet.ts``: the final RGB shader only when its shared memory fits).

Bindings, params and grid: as every conv (see `kernels`); weights
output-major (identical to k-major for one output block).
"""

from __future__ import annotations

from dataclasses import dataclass

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import conv_direct, conv_spatial
from oidn_gpu.kernels.gemm import FINAL_PIXELS, FinalLayer, FinalPatch
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Kernel, Precision

FAMILY = "conv-final-rgb"


@dataclass(frozen=True)
class FinalVariant:
    """The final-layer kernel `generate` makes: its mode (never SHARED_AUTO), the output
    pixels per invocation and whether its patch is padded (both 1 / False for DIRECT)."""

    mode: FinalLayer
    pixels: int = 1
    padded: bool = False


def supports(spec: ConvSpec) -> bool:
    """True for a plain (single source, no upsample, no pool) conv to <= 4 channels in fp32 out."""
    return (
        spec.out_blocks == 1
        and len(spec.sources) == 1
        and not spec.sources[0].upsample
        and not spec.pool
        and spec.out_precision is Precision.FP32
    )


def resolve(
    spec: ConvSpec,
    mode: FinalLayer | str,
    limits: DeviceLimits,
    pixels: int = 1,
    patch: FinalPatch | str = FinalPatch.LINEAR,
) -> FinalVariant:
    """The variant `generate` makes for ``mode``, ``pixels`` and ``patch`` on ``limits``.

    SHARED_AUTO tries cached weights, then the patch alone; SHARED_INPUT_WEIGHTS cached
    weights only (oidn-webgpu's rule: the weights cached, or the direct conv);
    SHARED_INPUT the patch alone; each first with ``pixels``, then with half as many,
    down to 1. DIRECT when nothing fits (or asked for).
    """
    mode = FinalLayer(mode)
    padded = FinalPatch(patch) is FinalPatch.PADDED
    if pixels not in FINAL_PIXELS:
        raise InvalidArgumentError(
            f"invalid final_pixels={pixels!r}; allowed values: {', '.join(map(str, FINAL_PIXELS))}"
        )
    if mode is FinalLayer.DIRECT:
        return FinalVariant(FinalLayer.DIRECT)
    cap = conv_spatial.storage_cap(limits)
    # SHARED_INPUT_WEIGHTS caches the weights or runs the direct conv, as oidn-webgpu does
    caching = {FinalLayer.SHARED_INPUT: (False,), FinalLayer.SHARED_INPUT_WEIGHTS: (True,)}.get(
        mode, (True, False)
    )
    while pixels >= 1:
        for cache in caching:
            if conv_spatial.storage_bytes(spec, cache, pixels, padded) <= cap:
                chosen = FinalLayer.SHARED_INPUT_WEIGHTS if cache else FinalLayer.SHARED_INPUT
                # padding that changes nothing (fp32, an odd block count) is no variant
                dense = conv_spatial.patch_layout(spec, pixels, padded).dense
                return FinalVariant(chosen, pixels, padded and not dense)
        pixels //= 2
    return FinalVariant(FinalLayer.DIRECT)


def generate(
    spec: ConvSpec,
    mode: FinalLayer | str = FinalLayer.SHARED_AUTO,
    limits: DeviceLimits | None = None,
    *,
    pixels: int = 1,
    patch: FinalPatch | str = FinalPatch.LINEAR,
    f32_sum: bool = False,
) -> Kernel:
    """Generate the final-layer kernel for ``spec`` (the variant `resolve` picks);
    ``f32_sum``: fp16 products summed in f32 rather than in 4-term f16 partials."""
    if not supports(spec):
        raise InvalidArgumentError(
            "the final RGB kernel needs one plain source, <= 4 output channels and an fp32 output"
        )
    limits = limits or DeviceLimits()
    chosen = resolve(spec, mode, limits, pixels, patch)
    if chosen.mode is FinalLayer.DIRECT:
        return conv_direct.generate(spec, f32_sum)
    return conv_spatial.generate(
        spec,
        cache_weights=chosen.mode is FinalLayer.SHARED_INPUT_WEIGHTS,
        family=FAMILY,
        pixels=chosen.pixels,
        padded=chosen.padded,
        limits=limits,
        f32_sum=f32_sum,
    )
