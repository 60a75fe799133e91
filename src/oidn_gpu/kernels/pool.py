"""Stand-alone 2x2 / stride 2 max pool on blocked tensors.

Invocation = one output pixel and one vec4 channel block: the max of the 4
input vec4s (exact in any precision, so no conversion is needed).
Layouts (`PoolLayout`): SPATIAL: ``gid = (x, y, block)``, grid
``(ceil(W/8), ceil(H/8), OB)``; CHANNELS: ``x * OB + block`` is linear in
``gid.x`` so neighbouring invocations read neighbouring vec4s, and rows wider
than ``max_workgroups_per_dimension`` workgroups continue in z.

Shapes ``[C, 2H, 2W] -> [C, H, W]``; params ``{height, width}`` of the OUTPUT.
Bindings: ``input`` (read), ``output`` (read_write), ``params``. No shared
memory. Trusted: the early return bounds x, y and the block; the input is read
at ``2y + 1 < 2H`` and ``2x + 1 < 2W``.
"""

from __future__ import annotations

from oidn_gpu.kernels import _common
from oidn_gpu.kernels.gemm import PoolLayout
from oidn_gpu.kernels.spec import (
    SHAPE_PARAMS,
    BindingKind,
    DeviceLimits,
    Kernel,
    PoolSpec,
    blocks,
    ceil_div,
)
from oidn_gpu.kernels.template import render

WG_X = 8
WG_Y = 8
FAMILY = "max-pool"


def generate(
    spec: PoolSpec, layout: PoolLayout = PoolLayout.CHANNELS, limits: DeviceLimits | None = None
) -> Kernel:
    """Generate the max pool for ``spec`` in ``layout`` (``limits`` bounds the CHANNELS grid)."""
    layout = PoolLayout(layout)
    limits = limits or DeviceLimits()
    nb = blocks(spec.channels)
    bindings, decls = _common.make_bindings(
        [
            ("input", BindingKind.STORAGE_READ, spec.precision.vec4),
            ("output", BindingKind.STORAGE_READ_WRITE, spec.precision.vec4),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    key = f"{FAMILY}[{spec.describe()} layout={layout.value}]"
    enables = _common.enables_for(spec.precision)
    source = render(
        "pool.wgsl",
        header=f"oidn_gpu.kernels.pool {key}",
        consts={"WG_X": WG_X, "WG_Y": WG_Y, "BLOCKS": nb},
        enables=enables,
        params_struct=SHAPE_PARAMS.wgsl(),
        bindings=decls,
        channels_layout=layout is PoolLayout.CHANNELS,
    )
    max_dim = limits.max_workgroups_per_dimension

    if layout is PoolLayout.CHANNELS:

        def grid(channels: int, height: int, width: int) -> tuple[int, int, int]:
            x, z = _common.wrap_linear(ceil_div(width * nb, WG_X), max_dim)
            return (x, ceil_div(height, WG_Y), z)

    else:
        grid = _common.pixel_grid(WG_X, WG_Y, nb)

    return Kernel(
        FAMILY,
        key,
        source,
        "main",
        (WG_X, WG_Y, 1),
        bindings,
        grid,
        trusted=True,
        features=enables,
        params=SHAPE_PARAMS,
        precision=spec.precision,
    )
