"""An alpha fitted to its frame's albedo on the GPU: `image.coverage.fit_coverage` in two kernels.

The arithmetic is `image.coverage`'s (a guided filter; constants from there), one
invocation per pixel in workgroups of `WG` x `WG`:

- `generate_fit` (``coverage-fit``): the affine fit ``alpha ~ a . guide + b`` of every
  window of ``2 * COVERAGE_RADIUS + 1`` pixels a side centred on the image extended by
  the radius on each side (``(H + 2r) x (W + 2r)`` windows). It sums the 13 window means
  of the centred alpha and guide straight from the images (coordinates outside the image
  read its nearest edge pixel), solves the ridge-regularised 3 x 3 system by its
  adjugate and stores ``(a0, a1, a2, b)`` as one ``vec4<f32>`` per window into ``ab``.
  Grid over ``(H + 2r, W + 2r)``.
- `generate_apply` (``coverage-apply``): the mean of the fits of the windows that hold
  a pixel, applied to its guide: the fitted alpha, dense ``H x W`` float32 in
  ``fitted``. Grid over ``(H, W)``.

Both sum a window down each column and then the columns from left to right, the order of
`image.coverage`'s box means, so that float32 rounds as there (a driver's compiler may
still reassociate the sums, as WGSL allows).

The alpha is ``array<f32>``; the guide ``array<f32>``, or float16 pairs in ``array<u32>``
(widened exactly, as the input pass reads them). Each image has an offset, a pixel and a
row stride (in elements) and a channel count in the params (`COVERAGE_PARAMS`): a guide
read with ``channels`` 3 gives its first three values, with 1 its first value three times
(`image.coverage`'s one-channel guide). With ``clip`` (1 in the params) the fit reads the
alpha clipped to 0..1 and the apply writes the fitted alpha clipped to 0..1, as
``alpha="denoise"`` fits it; 0 fits the values as they are. Both kernels keep wgpu's
bounds checks. `generate_clip` clips one plane into another (an alpha with no albedo to
fit to, the alpha's denoised plane into a result's fourth channel).
"""

from __future__ import annotations

from typing import Any

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.coverage import CENTRE, COVERAGE_EPS, COVERAGE_RADIUS
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.autoexposure import IMAGE_DTYPES, half_constants, image_binding_type
from oidn_gpu.kernels.spec import BindingKind, Kernel, ParamField, ParamsLayout
from oidn_gpu.kernels.template import render

WG = 16  # invocations of a workgroup per side
SIDE = 2 * COVERAGE_RADIUS + 1  # pixels of a window per side

_IMAGE_FIELDS = ("offset", "pixel_stride", "row_stride", "channels")
COVERAGE_PARAMS = ParamsLayout(
    (
        *(ParamField(f"{image}_{f}") for image in ("alpha", "guide") for f in _IMAGE_FIELDS),
        ParamField("height"),
        ParamField("width"),
        ParamField("clip"),
    )
)
# `generate_clip`'s: the source and destination planes (their channels are 1), then the size.
CLIP_PARAMS = ParamsLayout(
    (
        *(ParamField(f"{plane}_{f}") for plane in ("src", "dst") for f in _IMAGE_FIELDS),
        ParamField("height"),
        ParamField("width"),
    )
)


def _check_dtype(dtype: str) -> None:
    if dtype not in IMAGE_DTYPES:
        raise InvalidArgumentError(
            f"unsupported coverage guide dtype {dtype!r}; expected 'float32' or 'float16'"
        )


def _render(template: str, key: str, dtype: str, decls: list[dict], images: list[dict]) -> str:
    consts: dict[str, object] = {
        "WG": WG,
        "RADIUS": COVERAGE_RADIUS,
        "SIDE": SIDE,
        "INV_COUNT": 1.0 / (SIDE * SIDE),
        "EPS": COVERAGE_EPS,
        "CENTRE": CENTRE,
        **half_constants((dtype,)),
    }
    return render(
        template,
        header=f"oidn_gpu.kernels.coverage {key}",
        consts=consts,
        params_struct=COVERAGE_PARAMS.wgsl(),
        bindings=decls,
        images=images,
        any_f16=dtype == "float16",
    )


def _guide(dtype: str) -> dict[str, object]:
    """The guide's entry in ``image_read.wgsl``'s images."""
    return {"name": "guide", "buffer": "guide_image", "f16": dtype == "float16"}


def generate_fit(dtype: str = "float32") -> Kernel:
    """Every window's fit ``(a0, a1, a2, b)`` (see module doc); ``dtype``: the guide's
    element type, ``"float32"`` or ``"float16"``.

    Bindings: ``alpha_image``, ``guide_image``, ``ab``, ``params``.
    """
    alpha = {"name": "alpha", "buffer": "alpha_image", "f16": False}
    return _kernel(
        "coverage-fit",
        dtype,
        [
            ("alpha_image", BindingKind.STORAGE_READ, "f32"),
            ("guide_image", BindingKind.STORAGE_READ, image_binding_type(dtype)),
            ("ab", BindingKind.STORAGE_READ_WRITE, "vec4<f32>"),
        ],
        [alpha, _guide(dtype)],
    )


def generate_apply(dtype: str = "float32") -> Kernel:
    """The fitted alpha from the windows' fits (see module doc); ``dtype``: the guide's
    element type, ``"float32"`` or ``"float16"``.

    Bindings: ``ab``, ``guide_image``, ``fitted``, ``params``.
    """
    return _kernel(
        "coverage-apply",
        dtype,
        [
            ("ab", BindingKind.STORAGE_READ, "vec4<f32>"),
            ("guide_image", BindingKind.STORAGE_READ, image_binding_type(dtype)),
            ("fitted", BindingKind.STORAGE_READ_WRITE, "f32"),
        ],
        [_guide(dtype)],
    )


def generate_clip() -> Kernel:
    """One float32 plane clipped to 0..1 into another (``alpha-clip``): pixel (y, x) of
    ``src_image`` (offset, pixel and row stride in `CLIP_PARAMS`) clamped to 0..1 and
    written to the same pixel of ``dst_image``; both may be a channel of a wider image.
    Grid over ``(H, W)``.

    Bindings: ``src_image``, ``dst_image``, ``params``.
    """
    key = "alpha-clip"
    bindings, decls = _common.make_bindings(
        [
            ("src_image", BindingKind.STORAGE_READ, "f32"),
            ("dst_image", BindingKind.STORAGE_READ_WRITE, "f32"),
            ("params", BindingKind.UNIFORM, ""),
        ]
    )
    source = render(
        "alpha_clip.wgsl",
        header=f"oidn_gpu.kernels.coverage {key}",
        consts={"WG": WG},
        params_struct=CLIP_PARAMS.wgsl(),
        bindings=decls,
    )
    grid = _common.pixel_grid(WG, WG)
    return Kernel(key, key, source, "main", (WG, WG, 1), bindings, grid, params=CLIP_PARAMS)


def _kernel(
    name: str, dtype: str, buffers: list[tuple[str, Any, str]], images: list[dict[str, object]]
) -> Kernel:
    """The kernel ``name`` (its template ``name`` with ``_`` for ``-``, ``.wgsl``) for a
    guide of ``dtype``: ``buffers`` bound in order, then ``params``; ``images`` read
    through ``image_read.wgsl``."""
    _check_dtype(dtype)
    key = f"{name}[{dtype}]"
    bindings, decls = _common.make_bindings([*buffers, ("params", BindingKind.UNIFORM, "")])
    source = _render(f"{name.replace('-', '_')}.wgsl", key, dtype, decls, images)
    grid = _common.pixel_grid(WG, WG)
    return Kernel(name, key, source, "main", (WG, WG, 1), bindings, grid, params=COVERAGE_PARAMS)
