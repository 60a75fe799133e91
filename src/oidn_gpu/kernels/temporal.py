"""The temporal mode's two passes as WGSL (`oidn_gpu.temporal.passes` is their oracle).

- `generate_reproject` (``temporal_reproject.wgsl``): one invocation per pixel, 8 x 8
  workgroups. Bindings ``motion`` (2 floats per pixel), ``guide``, ``prev_guide``,
  ``signal``, ``prev_state`` (read), ``out`` (the reprojection, read-write), ``params``.
- `generate_changes` (``temporal_changes.wgsl``): the same grid. Bindings ``signal``,
  ``gathered`` (pass 1's result, read), ``out`` (the reprojection), ``params``.
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


def generate_reproject(spec: TemporalSpec) -> Kernel:
    """Pass 1 (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    key = f"temporal-reproject[{spec.describe()}]"
    bindings, decls = _common.make_bindings(
        [(name, BindingKind.STORAGE_READ, "f32")
         for name in ("motion", "guide", "prev_guide", "signal", "prev_state")]
        + [("out", BindingKind.STORAGE_READ_WRITE, "f32"), ("params", BindingKind.UNIFORM, "")]
    )
    consts = {
        **_layout_consts(),
        "DEPTH_TOLERANCE": float(f32(p.depth_tolerance)),
        "NORMAL_COS": float(f32(1.0 - p.normal_tolerance)),
        "MIN_NORMAL_LENGTH": float(f32(tp.MIN_NORMAL_LENGTH)),
        "ALBEDO_TOLERANCE": float(f32(p.albedo_tolerance)),
        "MIN_TAP_WEIGHT": float(f32(tp.MIN_TAP_WEIGHT)),
        "SUBPIXEL_TOLERANCE": float(f32(p.subpixel_tolerance)),
        "HISTORY": float(f32(p.history)),
        "OUTPUT_HISTORY": float(f32(1) / f32(max(p.output_blend, 1e-6))),
        "FIREFLY_RATIO": float(f32(p.firefly_ratio)),
        "LUMINANCE_R": float(f32(tp.LUMINANCE[0])),
        "LUMINANCE_G": float(f32(tp.LUMINANCE[1])),
        "LUMINANCE_B": float(f32(tp.LUMINANCE[2])),
    }
    source = render(
        "temporal_reproject.wgsl",
        header=f"oidn_gpu.kernels.temporal.generate_reproject {key}",
        consts=consts,
        params_struct=TEMPORAL_PARAMS.wgsl(),
        bindings=decls,
        use_depth=p.use_depth,
        use_normal=p.use_normal,
        use_albedo=p.use_albedo,
        fireflies=p.firefly_ratio > 0,
    )
    return Kernel("temporal-reproject", key, source, "main", (WG, WG, 1), bindings, _grid,
                  params=TEMPORAL_PARAMS)


def generate_changes(spec: TemporalSpec) -> Kernel:
    """Pass 1b (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    key = f"temporal-changes[{p.change_sigmas}]"
    bindings, decls = _common.make_bindings(
        [("signal", BindingKind.STORAGE_READ, "f32"),
         ("gathered", BindingKind.STORAGE_READ, "f32"),
         ("out", BindingKind.STORAGE_READ_WRITE, "f32"), ("params", BindingKind.UNIFORM, "")]
    )
    consts = {
        **_layout_consts(),
        "RADIUS": I32(tp.CHANGE_RADIUS),
        "INV_WINDOW": float(f32(1.0 / (2 * tp.CHANGE_RADIUS + 1) ** 2)),
        "SIDE": float(f32(2 * tp.CHANGE_RADIUS + 1)),
        "CHANGE_SIGMAS": float(f32(p.change_sigmas)),
        "MAX_LUMINANCE": float(f32(tp.MAX_CHANGE_LUMINANCE)),
        "LUMINANCE_R": float(f32(tp.LUMINANCE[0])),
        "LUMINANCE_G": float(f32(tp.LUMINANCE[1])),
        "LUMINANCE_B": float(f32(tp.LUMINANCE[2])),
    }
    source = render(
        "temporal_changes.wgsl",
        header=f"oidn_gpu.kernels.temporal.generate_changes {key}",
        consts=consts,
        params_struct=TEMPORAL_PARAMS.wgsl(),
        bindings=decls,
    )
    return Kernel("temporal-changes", key, source, "main", (WG, WG, 1), bindings, _grid,
                  params=TEMPORAL_PARAMS)


def generate_stabilize(spec: TemporalSpec) -> Kernel:
    """Pass 2 (see the module docstring)."""
    p = spec.params
    f32 = np.float32
    key = f"temporal-stabilize[{p.clamp},r{p.clamp_radius},g{p.clamp_gamma}]"
    bindings, decls = _common.make_bindings(
        [("denoised", BindingKind.STORAGE_READ, "f32"),
         ("reprojection", BindingKind.STORAGE_READ, "f32"),
         ("out", BindingKind.STORAGE_READ_WRITE, "f32"), ("params", BindingKind.UNIFORM, "")]
    )
    window = (2 * p.clamp_radius + 1) ** 2
    consts = {
        **_layout_consts(),
        "RADIUS": I32(p.clamp_radius),
        "INV_WINDOW": float(f32(1.0 / window)),
        "GAMMA": float(f32(p.clamp_gamma)),
    }
    source = render(
        "temporal_stabilize.wgsl",
        header=f"oidn_gpu.kernels.temporal.generate_stabilize {key}",
        consts=consts,
        params_struct=TEMPORAL_PARAMS.wgsl(),
        bindings=decls,
        clamp=p.clamp,
    )
    return Kernel("temporal-stabilize", key, source, "main", (WG, WG, 1), bindings, _grid,
                  params=TEMPORAL_PARAMS)
