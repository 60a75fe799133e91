"""The temporal mode's two passes as WGSL (`oidn_gpu.temporal.passes` is their oracle).

- `generate_reproject` (``temporal_reproject.wgsl``): one invocation per pixel, 8 x 8
  workgroups. Bindings ``motion`` (2 floats per pixel), ``guide``, ``prev_guide``,
  ``signal``, ``prev_state`` (read), ``out`` (the reprojection, read-write), ``params``.
- `generate_changes` (``temporal_changes.wgsl``): the same grid. Bindings ``signal``,
  ``gathered`` (pass 1's result, read), ``out`` (the reprojection), ``params``.
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
infinite: the host sanitizes every input first (`oidn_gpu.backends.wgpu.temporal`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from oidn_gpu.kernels import _common
from oidn_gpu.kernels.spec import BindingKind, Kernel, ParamField, ParamsLayout
from oidn_gpu.kernels.template import I32, render
from oidn_gpu.temporal import passes as tp

WG = 8
TEMPORAL_PARAMS = ParamsLayout((ParamField("width"), ParamField("height")))


@dataclass(frozen=True)
class TemporalSpec:
    """The parameters a temporal kernel is generated for."""

    params: tp.TemporalParams

    def describe(self) -> str:
        p = self.params
        guides = "".join(k for k, on in (("d", p.use_depth), ("n", p.use_normal),
                                          ("a", p.use_albedo)) if on)
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
        "GATHERED": tp.GATHERED,
        "UNKNOWN": tp.GUIDE_UNKNOWN,
        "WG_X": WG,
        "WG_Y": WG,
    }


def _grid(_channels: int, height: int, width: int) -> tuple[int, int, int]:
    return (-(-width // WG), -(-height // WG), 1)


def _kernel(family: str, key: str, inputs: tuple[str, ...], consts: dict[str, object],
            **context: object) -> Kernel:
    """The kernel ``temporal_<family>.wgsl``: float buffers ``inputs`` (read), ``out``
    (read-write) and the ``params`` uniform, one invocation per pixel."""
    bindings, decls = _common.make_bindings(
        [(name, BindingKind.STORAGE_READ, "f32") for name in inputs]
        + [("out", BindingKind.STORAGE_READ_WRITE, "f32"), ("params", BindingKind.UNIFORM, "")]
    )
    source = render(
        f"temporal_{family}.wgsl",
        header=f"oidn_gpu.kernels.temporal.generate_{family} {key}",
        consts={**_layout_consts(), **consts},
        params_struct=TEMPORAL_PARAMS.wgsl(),
        bindings=decls,
        **context,
    )
    return Kernel(f"temporal-{family}", key, source, "main", (WG, WG, 1), bindings, _grid,
                  params=TEMPORAL_PARAMS)


def _luminance_consts() -> dict[str, object]:
    f32 = np.float32
    return {f"LUMINANCE_{c}": float(f32(w)) for c, w in zip("RGB", tp.LUMINANCE, strict=True)}


def generate_reproject(spec: TemporalSpec) -> Kernel:
    """Pass 1 (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "DEPTH_TOLERANCE": float(f32(p.depth_tolerance)),
        "NORMAL_COS": float(f32(1.0 - p.normal_tolerance)),
        "MIN_NORMAL_LENGTH": float(f32(tp.MIN_NORMAL_LENGTH)),
        "ALBEDO_TOLERANCE": float(f32(p.albedo_tolerance)),
        "MIN_TAP_WEIGHT": float(f32(tp.MIN_TAP_WEIGHT)),
        "SUBPIXEL_TOLERANCE": float(f32(p.subpixel_tolerance)),
        "HISTORY": float(f32(p.history)),
        "OUTPUT_HISTORY": float(f32(1) / f32(max(p.output_blend, 1e-6))),
        "FIREFLY_RATIO": float(f32(p.firefly_ratio)),
        **_luminance_consts(),
    }
    return _kernel(
        "reproject", f"temporal-reproject[{spec.describe()}]",
        ("motion", "guide", "prev_guide", "signal", "prev_state"), consts,
        use_depth=p.use_depth, use_normal=p.use_normal, use_albedo=p.use_albedo,
        fireflies=p.firefly_ratio > 0,
    )


def generate_changes(spec: TemporalSpec) -> Kernel:
    """Pass 1b (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "RADIUS": I32(tp.CHANGE_RADIUS),
        "INV_WINDOW": float(f32(1.0 / (2 * tp.CHANGE_RADIUS + 1) ** 2)),
        "SIDE": float(f32(2 * tp.CHANGE_RADIUS + 1)),
        "CHANGE_SIGMAS": float(f32(p.change_sigmas)),
        "MAX_LUMINANCE": float(f32(tp.MAX_CHANGE_LUMINANCE)),
        **_luminance_consts(),
    }
    return _kernel("changes", f"temporal-changes[{p.change_sigmas}]", ("signal", "gathered"),
                   consts)


def generate_near_rows(spec: TemporalSpec) -> Kernel:
    """Pass 1c's row dilation (see the module docstring)."""
    margin = spec.params.disocclusion_margin
    return _kernel("near_rows", f"temporal-near-rows[{margin}]", ("reprojection",),
                   {"MARGIN": I32(margin)})


def generate_near(spec: TemporalSpec) -> Kernel:
    """Pass 1c's column dilation and the input history dropped (see the module docstring)."""
    margin = spec.params.disocclusion_margin
    return _kernel("near", f"temporal-near[{margin}]", ("signal", "rows"),
                   {"MARGIN": I32(margin)})


def generate_stabilize(spec: TemporalSpec) -> Kernel:
    """Pass 2 (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    consts = {
        "RADIUS": I32(p.clamp_radius),
        "INV_WINDOW": float(f32(1.0 / (2 * p.clamp_radius + 1) ** 2)),
        "GAMMA": float(f32(p.clamp_gamma)),
    }
    key = f"temporal-stabilize[{p.clamp},r{p.clamp_radius},g{p.clamp_gamma}]"
    return _kernel("stabilize", key, ("denoised", "reprojection"), consts, clamp=p.clamp)
