"""The temporal mode's two passes as WGSL (`oidn_gpu.temporal.passes` is their oracle).

- `generate_reproject` (``temporal_reproject.wgsl``): one invocation per pixel, 8 x 8
  workgroups. Bindings ``motion`` (2 floats per pixel), ``guide``, ``prev_guide``,
  ``signal``, ``prev_state`` (read), ``out`` (the reprojection, read-write), ``params``.
- `generate_changes` (``temporal_changes.wgsl``): the same grid. Bindings ``signal``,
  ``gathered`` (pass 1's result, read), ``out`` (the reprojection), ``params``.
  (``prev_state`` and ``out`` of the reprojection, and the device session's ``hist``
  below, are bound as ``vec4<f32>``: 16 floats per pixel, four at a time.)
- `generate_near_rows` (``temporal_near_rows.wgsl``) and `generate_near`
  (``temporal_near.wgsl``): pass 1c as a row and then a column dilation. Bindings
  ``reprojection`` (read), ``out`` (1 float per pixel); then ``signal``, ``rows`` (read),
  ``out`` (the reprojection, changed in place).
- `generate_stabilize` (``temporal_stabilize.wgsl``): the same grid. Bindings
  ``denoised`` (3 floats per pixel), ``reprojection`` (read), ``out`` (3 floats per
  pixel), ``params``.

The image size is the ``params`` uniform (`TEMPORAL_PARAMS`), so one kernel serves every
size; the `TemporalParams` values are constants, printed from float32 values computed
here exactly as the NumPy passes compute them. WGSL may assume that no value is NaN or
infinite: the host sanitizes every input first (`oidn_gpu.backends.wgpu.temporal`), or,
in the device session (`oidn_gpu.backends.wgpu.temporal_session`), the kernels that read
raw images read their bits (``temporal_bits.wgsl``):

- `generate_pack` (``temporal_pack.wgsl``): the frame's color, albedo, normal, depth and
  motion (bits) into ``signal``, ``guide`` and a finite ``motion_out`` (or the guide of
  some images and the motion alone, before the others are uploaded);
- `generate_reproject` with ``part="gather"`` and ``"accumulate"``: pass 1 in two halves
  (the gathered history in between), the second also writing the light-change test's
  luminances, which `generate_changes` with ``luma=True`` reads (and then changes the
  reprojection in place), counting the pixels that kept their history into an atomic
  ``counter`` (``count``: no pass 1b or 1c changes the flag counted) and writing the
  pixels without history into ``missing`` (``missing``, which `generate_near_rows` with
  ``compact=True`` reads);
- `generate_restart` (``temporal_restart.wgsl``): the reprojection of a restart written
  over the reprojection on a restart or a camera cut (decided on the device);
- `generate_stabilize` with ``session=True``: pass 2 on the denoised frame's bits, which
  also writes the next history ``state``.

Those bind `SESSION_PARAMS`, whose first fields are `TEMPORAL_PARAMS`' (so the passes
above bind the same uniform). Every kernel here indexes only the pixels of the
``params`` size (neighbours clamped to the image) in buffers of that size, so the device
session builds them trusted (`Kernel.trusted`: no runtime bounds checks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import BindingKind, Kernel, ParamField, ParamsLayout
from oidn_gpu.kernels.template import I32, render
from oidn_gpu.temporal import passes as tp

WG = 8
TEMPORAL_PARAMS = ParamsLayout((ParamField("width"), ParamField("height")))
# The device session's uniform: the image size first (so the passes above bind it too),
# then the cut test's least count of pixels with history and the restart flag.
SESSION_PARAMS = ParamsLayout(
    (ParamField("width"), ParamField("height"), ParamField("keep_min"), ParamField("restart"))
)
# The inputs of each part of the reprojection (`generate_reproject`): the whole pass, and
# its two halves (the gathered history ``hist`` in between).
REPROJECT_PARTS = {
    "all": ("motion", "guide", "prev_guide", "signal", "prev_state"),
    "gather": ("motion", "guide", "prev_guide", "prev_state"),
    "accumulate": ("motion", "guide", "signal", "hist"),
}
# Non-finite motion is replaced by this: beyond any image's reach, so it is rejected.
FAR_MOTION = 1.0e30


@dataclass(frozen=True)
class TemporalSpec:
    """The parameters a temporal kernel is generated for."""

    params: tp.TemporalParams

    def describe(self) -> str:
        p = self.params
        guides = "".join(
            k for k, on in (("d", p.use_depth), ("n", p.use_normal), ("a", p.use_albedo)) if on
        )
        values = ",".join(f"{name}={getattr(p, name)}" for name in p.names)
        return f"{guides or '-'},{values}"


def _layout_consts() -> dict[str, object]:
    return {
        "GUIDE_CHANNELS": tp.GUIDE_CHANNELS,
        "SIGNAL_CHANNELS": tp.SIGNAL_CHANNELS,
        "STATE_CHANNELS": tp.STATE_CHANNELS,
        "REPROJECTION_CHANNELS": tp.REPROJECTION_CHANNELS,
        "STATE_COUNT": tp.STATE_COUNT,
        "STATE_OUTPUT": tp.STATE_OUTPUT,
        "STATE_OUTPUT_COUNT": tp.STATE_OUTPUT_COUNT,
        "REPROJECTION_VALID": tp.REPROJECTION_VALID,
        "REPROJECTION_OUTPUT_COUNT": tp.REPROJECTION_OUTPUT_COUNT,
        "REPROJECTION_INPUT_SCALE": tp.REPROJECTION_INPUT_SCALE,
        "GATHERED": tp.GATHERED,
        "UNKNOWN": tp.GUIDE_UNKNOWN,
        "STATE_VEC4S": tp.STATE_CHANNELS // 4,
        "WG_X": WG,
        "WG_Y": WG,
    }


def _grid(_channels: int, height: int, width: int) -> tuple[int, int, int]:
    return (-(-width // WG), -(-height // WG), 1)


def _kernel(
    family: str, key: str, inputs: tuple[str, ...], consts: dict[str, object], **context: object
) -> Kernel:
    """The kernel ``temporal_<family>.wgsl``: float buffers ``inputs`` (read), ``out``
    (read-write) and the ``params`` uniform, one invocation per pixel."""
    return _typed_kernel(
        family, key, [(name, "f32") for name in inputs], [("out", "f32")], consts, **context
    )


def _typed_kernel(
    family: str,
    key: str,
    reads: list[tuple[str, str]],
    writes: list[tuple[str, str]],
    consts: dict[str, object],
    params: ParamsLayout = TEMPORAL_PARAMS,
    **context: object,
) -> Kernel:
    """The kernel ``temporal_<family>.wgsl``: buffers ``reads`` (read) and ``writes``
    (read-write) of the given WGSL element types, then the ``params`` uniform."""
    bindings, decls = _common.make_bindings(
        [(name, BindingKind.STORAGE_READ, kind) for name, kind in reads]
        + [(name, BindingKind.STORAGE_READ_WRITE, kind) for name, kind in writes]
        + [("params", BindingKind.UNIFORM, "")]
    )
    source = render(
        f"temporal_{family}.wgsl",
        header=f"oidn_gpu.kernels.temporal.generate_{family} {key}",
        consts={**_layout_consts(), **consts},
        params_struct=params.wgsl(),
        bindings=decls,
        **context,
    )
    return Kernel(
        f"temporal-{family}",
        key,
        source,
        "main",
        (WG, WG, 1),
        bindings,
        _grid,
        trusted=True,
        params=params,
    )


def _luminance_consts() -> dict[str, object]:
    f32 = np.float32
    return {f"LUMINANCE_{c}": float(f32(w)) for c, w in zip("RGB", tp.LUMINANCE, strict=True)}


def generate_reproject(
    spec: TemporalSpec, part: str = "all", *, count: bool = False, missing: bool = False
) -> Kernel:
    """Pass 1 (see the module docstring); ``part`` ``"gather"`` or ``"accumulate"``: its
    two halves, as the device session runs them (`REPROJECT_PARTS`); the accumulation
    with ``count`` and ``missing`` also counts and marks the pixels that kept their
    history (``counter`` and ``missing`` written after ``out`` and ``luma``)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "DEPTH_TOLERANCE": float(f32(p.depth_tolerance)),
        "NORMAL_COS": float(f32(1.0 - p.normal_tolerance)),
        "MIN_NORMAL_LENGTH": float(f32(tp.MIN_NORMAL_LENGTH)),
        "SURFACE_DEPTH": float(f32(tp.SURFACE_DEPTH)),
        "SILHOUETTE_NORMAL_COS": float(f32(tp.SILHOUETTE_NORMAL_COS)),
        "ALBEDO_TOLERANCE": float(f32(p.albedo_tolerance)),
        "MIN_TAP_WEIGHT": float(f32(tp.MIN_TAP_WEIGHT)),
        "SUBPIXEL_TOLERANCE": float(f32(p.subpixel_tolerance)),
        "HISTORY": float(f32(p.history)),
        "OUTPUT_HISTORY": float(f32(1) / f32(max(p.output_blend, 1e-6))),
        "FIREFLY_RATIO": float(f32(p.firefly_ratio)),
        **_luminance_consts(),
    }
    inputs = REPROJECT_PARTS.get(part)
    if inputs is None:
        raise InvalidArgumentError(f"unknown reprojection part {part!r}")
    if (count or missing) and part != "accumulate":
        raise InvalidArgumentError(
            f"the reprojection part {part!r} counts nothing; "
            "expected part='accumulate' with count or missing"
        )
    # STATE_VEC4S vec4s per pixel of the state and of the gathered history
    assert tp.STATE_CHANNELS == tp.REPROJECTION_CHANNELS and tp.STATE_CHANNELS % 4 == 0
    # The halves' accumulation also writes the light-change test's luminances ("luma").
    luma = part == "accumulate" and p.change_sigmas != 0
    writes = [("out", "vec4<f32>")] + ([("luma", "f32")] if luma else [])
    writes += [("missing", "f32")] if missing else []
    writes += [("counter", "atomic<u32>")] if count else []
    consts["MAX_LUMINANCE"] = float(f32(tp.MAX_CHANGE_LUMINANCE))
    suffix = "" if part == "all" else f"[{part}]"
    suffix += "[count]" * count + "[missing]" * missing
    reads = [(name, "vec4<f32>" if name in ("prev_state", "hist") else "f32") for name in inputs]
    return _typed_kernel(
        "reproject",
        f"temporal-reproject[{spec.describe()}]{suffix}",
        reads,
        writes,
        consts,
        use_depth=p.use_depth,
        use_normal=p.use_normal,
        use_albedo=p.use_albedo,
        fireflies=p.firefly_ratio > 0,
        part=part,
        luma=luma,
        count=count,
        missing=missing,
    )


def generate_changes(spec: TemporalSpec, *, luma: bool = False) -> Kernel:
    """Pass 1b (see the module docstring); ``luma``: the luminances are read from the
    ``luma`` buffer the reprojection's accumulation wrote (2 floats per pixel), and the
    reprojection ``out`` is changed in place (bindings ``signal``, ``luma``, ``out``)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "RADIUS": I32(tp.CHANGE_RADIUS),
        "INV_WINDOW": float(f32(1.0 / (2 * tp.CHANGE_RADIUS + 1) ** 2)),
        "SIDE": float(f32(2 * tp.CHANGE_RADIUS + 1)),
        "CHANGE_SIGMAS": float(f32(p.change_sigmas)),
        "CHANGE_OUTPUT_HISTORY": float(f32(p.change_output_history)),
        "MAX_LUMINANCE": float(f32(tp.MAX_CHANGE_LUMINANCE)),
        **_luminance_consts(),
    }
    inputs = ("signal", "luma") if luma else ("signal", "gathered")
    key = f"temporal-changes[{p.change_sigmas},{p.change_output_history}]" + (
        "[luma]" if luma else ""
    )
    return _kernel("changes", key, inputs, consts, luma=luma)


def generate_near_rows(spec: TemporalSpec, *, compact: bool = False) -> Kernel:
    """Pass 1c's row dilation (see the module docstring); ``compact``: the pixels without
    history read from ``missing`` (1 float per pixel) instead of the reprojection."""
    margin = spec.params.disocclusion_margin
    key = f"temporal-near-rows[{margin}]" + ("[compact]" if compact else "")
    return _kernel(
        "near_rows",
        key,
        ("missing",) if compact else ("reprojection",),
        {"MARGIN": I32(margin)},
        compact=compact,
    )


def generate_near(spec: TemporalSpec) -> Kernel:
    """Pass 1c's column dilation and the input history dropped (see the module docstring)."""
    margin = spec.params.disocclusion_margin
    return _kernel("near", f"temporal-near[{margin}]", ("signal", "rows"), {"MARGIN": I32(margin)})


def generate_stabilize(spec: TemporalSpec, *, session: bool = False) -> Kernel:
    """Pass 2 (see the module docstring); ``session``: the device session's form (the
    denoised frame and ``out`` as bits, and the next history ``state`` written too)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "RADIUS": I32(p.clamp_radius),
        "INV_WINDOW": float(f32(1.0 / (2 * p.clamp_radius + 1) ** 2)),
        "GAMMA": float(f32(p.clamp_gamma)),
    }
    key = f"temporal-stabilize[{p.clamp},r{p.clamp_radius},g{p.clamp_gamma}]"
    if not session:
        return _typed_kernel(
            "stabilize",
            key,
            [("denoised", "f32"), ("reprojection", "vec4<f32>")],
            [("out", "f32")],
            consts,
            clamp=p.clamp,
            session=False,
        )
    consts["MAX_SIGNAL"] = float(f32(tp.MAX_SIGNAL))
    return _typed_kernel(
        "stabilize",
        f"{key}[session]",
        [("denoised", "u32"), ("reprojection", "vec4<f32>")],
        [("out", "u32"), ("state", "vec4<f32>")],
        consts,
        SESSION_PARAMS,
        clamp=p.clamp,
        session=True,
    )


# --- the device session's kernels (`oidn_gpu.backends.wgpu.temporal_session`) -------------


def generate_pack(
    albedo: bool, normal: bool, depth: bool, *, signal: bool = True, motion: bool = True
) -> Kernel:
    """The frame's images packed into ``signal`` (with ``signal``; the color is bound
    then) and ``guide``, its motion made finite (with ``motion``) (``temporal_pack.wgsl``;
    the images named are bound as bits, ``guide`` as vec4s)."""
    assert tp.GUIDE_CHANNELS == 8  # two vec4s per pixel
    reads = [
        (name, "u32")
        for name, bound in (
            ("color", signal),
            ("albedo", albedo),
            ("normal", normal),
            ("depth", depth),
            ("motion", motion),
        )
        if bound
    ]
    writes = [("signal", "f32")] if signal else []
    writes += [("guide", "vec4<f32>")] + ([("motion_out", "f32")] if motion else [])
    consts = {
        "MAX_SIGNAL": float(np.float32(tp.MAX_SIGNAL)),
        "FAR_MOTION": float(np.float32(FAR_MOTION)),
    }
    given = "".join(
        k
        for k, on in (("c", signal), ("a", albedo), ("n", normal), ("d", depth), ("m", motion))
        if on
    )
    return _typed_kernel(
        "pack",
        f"temporal-pack[{given}]",
        reads,
        writes,
        consts,
        SESSION_PARAMS,
        albedo=albedo,
        normal=normal,
        depth=depth,
        signal=signal,
        motion=motion,
    )


def generate_restart() -> Kernel:
    """The reprojection of a restart written over ``out`` where the frame restarts."""
    return _typed_kernel(
        "restart",
        "temporal-restart",
        [("signal", "f32"), ("counter", "u32")],
        [("out", "f32")],
        {},
        SESSION_PARAMS,
    )
