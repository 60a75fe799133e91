"""Fused conv + activation + 2x2 max pool: only the pooled tensor is written.

``ConvSpec.pool = True``. Two implementations: the direct kernel (one
invocation per pooled pixel and output block, computing its 2x2 conv outputs
and keeping the max after the activation; see `conv_direct`) and the implicit
GEMM (4 consecutive GEMM rows are one pooled pixel's quad, reduced in
registers, or with 2 rows per thread across two invocations through workgroup
memory; ``pool_layout`` orders its workgroups; see `conv_igemm`). Output
``[O, H/2, W/2]``; params ``{height, width}`` are the pooled (output) size; H
and W of the conv are even. Max pool commutes with fp16 rounding, so fusion
never changes results.
"""

from __future__ import annotations

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.gemm import GemmOptions
from oidn_gpu.kernels.select import POOL_CONV_KERNELS, generate_form
from oidn_gpu.kernels.spec import ConvSpec, DeviceLimits, Kernel


def generate(
    spec: ConvSpec,
    kernel: str = "direct",
    options: GemmOptions | None = None,
    limits: DeviceLimits | None = None,
) -> Kernel:
    """Generate the fused conv+pool with ``kernel`` = ``"direct"`` or ``"implicit-gemm"``."""
    if not spec.pool:
        raise InvalidArgumentError("conv_pool needs a ConvSpec with pool=True")
    allowed = ", ".join(repr(k) for k in POOL_CONV_KERNELS)
    error = f"invalid kernel={kernel!r} for a fused conv+pool; allowed values: {allowed}"
    return generate_form(spec, kernel, options, limits, kinds=POOL_CONV_KERNELS, error=error)
