"""Fused decoder conv: nearest x2 upsample of some sources + channel concat + 3x3 conv.

Neither the upsampled nor the concatenated tensor exists: the conv's loads
read source ``i`` at ``(y / 2, x / 2)`` when it is upsampled and pick the
source by input block (blocks of source 0 first, each source padded to whole
vec4 blocks; the packed weights use the same concatenated block order, see
`kernels.weights`). Forms: direct (`conv_direct`), tiled implicit GEMM
(`conv_igemm`, ``GemmOptions.decoder_load`` chooses per-load or source-first
source selection; ``decoder_form="parity"``: one output parity per workgroup, the
upsampled source through 2x2 low-resolution taps, `conv_parity`), spatial halo
(`conv_spatial`) and subgroup (`conv_subgroup`). The conv resolution (= output,
params ``{height, width}``) is even when a source is upsampled. Unlike OIDN's HWC GPU
backends, the concat is not split into two convs, so no intermediate fp16 rounding happens.
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.select import CONV_KERNELS, generate_form
from oidn_gpu.kernels.spec import ConvSource, ConvSpec, DeviceLimits, Kernel, Precision

KINDS = CONV_KERNELS


def decoder_spec(
    upsampled_channels: int,
    skip_channels: int,
    out_channels: int,
    precision: Precision = Precision.FP32,
    *,
    relu: bool = True,
    out_precision: Precision | None = None,
) -> ConvSpec:
    """The U-Net decoder conv: ``concat(upsample(low), skip)``."""
    return ConvSpec(
        (ConvSource(upsampled_channels, True), ConvSource(skip_channels)),
        out_channels,
        precision,
        relu,
        False,
        out_precision,
    )


def generate(
    spec: ConvSpec,
    kernel: str = "direct",
    options: GemmOptions | None = None,
    limits: DeviceLimits | None = None,
) -> Kernel:
    """Generate the fused decoder conv in form ``kernel`` (one of `KINDS`)."""
    if not spec.decoder:
        raise InvalidArgumentError("decoder needs several sources or an upsampled source")
    error = f"invalid decoder kernel={kernel!r}; allowed values: {', '.join(KINDS)}"
    return generate_form(spec, kernel, options, limits, kinds=KINDS, error=error)
