"""Motion-vector passes as renderers write them, read into one canonical form.

Canonical form (`Motion`): ``backward`` is an H x W x 2 float32 array of pixels, x to the
right and y down (the EXR's pixel rows, top row first): the point seen at pixel (x, y) in
frame t was at (x + mx, y + my) in frame t-1. ``forward``, where the pass has it, is the same
towards frame t+1. Non-finite vectors (NaN, infinity) are set to 0 in both arrays and marked
in ``invalid``; callers must not use those pixels' history.

The conventions (`CONVENTIONS`; docs/aovs.md has the table):

* ``cycles``: Blender Cycles' ``Vector`` pass, 4 channels X, Y, Z, W in pixels, raster y up
  (origin at the bottom-left: Cycles ``camera.cpp`` builds raster space from the view plane's
  bottom; Blender writes EXR rows top first). X, Y = position in the previous frame -
  position in this one; Z, W = position in this frame - position in the next one (Cycles
  ``kernel/geom/primitive.h``, ``primitive_motion_vector``: ``motion_pre - motion_center``
  and ``motion_center - motion_post``). So backward = (X, -Y) and forward = (-Z, W).
* ``arnold``: Arnold's ``motionvector`` AOV (VECTOR2, "screen space motion vector", Arnold
  developer guide, built-in AOVs), the motion over the normalised shutter [0, 1] (Arnold node
  reference, ``motion_vector``: "the motion vector will appear as if it happened during a
  normalized camera shutter of [0,1]"), so one frame's motion with a full-frame motion range;
  raw pixels (``raw`` on, not normalised by ``max_displace``). Forward in time, y up.
* ``karma``: Karma's ``motionvector`` render var: as Arnold (screen-space pixels over the
  shutter, forward, y up as Houdini's image space).
* ``vray``: V-Ray's ``VRayVelocity`` render element: "velocity information about objects that
  have moved between the current frame and the next frame" (Chaos V-Ray docs, Velocity
  render element), R, G, B = x, y, z; written unclamped (Clamp Velocity off, floating-point
  EXR), in pixels per frame, y up.
* ``redshift``: Redshift's ``MotionVectors`` AOV with Raw on (pixels, not normalised to
  0..1 by Max Motion In Pixels): forward over the frame, R, G = x, y, y up.
* ``renderman``: RenderMan's ``motionBack`` and ``motionFore`` (the backward and forward
  channels its cross-frame denoiser reads): raster pixels to the previous and next frame,
  raster y down (RenderMan raster space has its origin at the top-left).
* ``pixels``: the canonical form as it is (2 channels: backward, pixels, y down), for a
  layer named with ``layer=`` whose renderer is not one of these.

The forward-only conventions (Arnold, Karma, V-Ray, Redshift) give the motion towards the next
frame; their backward motion is taken as its negative (constant velocity over two frames),
and `Motion.backward_is_estimated` says so. Where a renderer's documentation does not state
the y direction (Arnold, Karma, V-Ray, Redshift), y up is assumed, as compositors (Nuke's
``forward``/``backward`` channels, RE:Vision's format) read these passes; name the
convention to read another one.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from oidn_gpu.errors import did_you_mean, one_of
from oidn_gpu.image import aovs
from oidn_gpu.image.io import (
    ROOT_LAYER,
    ImageFileError,
    Layer,
    describe_layers,
    list_layers,
    match_layer,
    read_layer,
)

CYCLES = "cycles"  # X, Y = previous - here; Z, W = here - next
VELOCITY = "velocity"  # x, y = next - here (one frame's motion, forward in time)
BACKWARD = "backward"  # x, y = previous - here


class MotionPassError(ImageFileError):
    """A motion pass is missing, has the wrong size or channels, or cannot be read."""


@dataclass(frozen=True)
class MotionConvention:
    """How one renderer writes its motion pass.

    Attributes:
        name: the key of `CONVENTIONS` (``'cycles'``, ``'vray'``, ...).
        renderer: who writes it, for messages and docs.
        layers: the layer names it is written under, in the order they are tried.
        kind: `CYCLES`, `VELOCITY` or `BACKWARD` (what the first channels mean).
        channels: the channel counts the layer may have (the first 2 or 4 are read).
        y_up: whether positive y points up the image.
        forward_layers: a second layer holding the forward motion (RenderMan), if any.
    """

    name: str
    renderer: str
    layers: tuple[str, ...]
    kind: str
    channels: tuple[int, ...]
    y_up: bool
    forward_layers: tuple[str, ...] = ()

    def describe(self) -> str:
        meaning = {
            CYCLES: "X, Y to the previous frame and Z, W from the next frame",
            VELOCITY: "x, y to the next frame",
            BACKWARD: "x, y to the previous frame",
        }[self.kind]
        counts = " or ".join(str(c) for c in self.channels)
        y = "up" if self.y_up else "down"
        return f"{self.renderer}: {counts} channels, pixels, {meaning}, y {y}"


def _renderer_motion(renderer: str) -> tuple[str, ...]:
    return next(r.motion for r in aovs.RENDERER_AOVS if r.renderer == renderer)


CONVENTIONS: dict[str, MotionConvention] = {
    c.name: c
    for c in (
        MotionConvention(
            "cycles", "Blender Cycles", _renderer_motion("Blender Cycles"), CYCLES, (4,), y_up=True
        ),
        MotionConvention(
            "arnold", "Arnold", _renderer_motion("Arnold"), VELOCITY, (2, 3), y_up=True
        ),
        MotionConvention("karma", "Karma", _renderer_motion("Karma"), VELOCITY, (2, 3), y_up=True),
        MotionConvention("vray", "V-Ray", _renderer_motion("V-Ray"), VELOCITY, (2, 3), y_up=True),
        MotionConvention(
            "redshift", "Redshift", _renderer_motion("Redshift"), VELOCITY, (2, 3), y_up=True
        ),
        MotionConvention(
            "renderman",
            "RenderMan",
            ("motionBack",),
            BACKWARD,
            (2, 3),
            y_up=False,
            forward_layers=("motionFore",),
        ),
        MotionConvention("pixels", "canonical", (), BACKWARD, (2, 3), y_up=False),
    )
}

# Component names in the order they are read, tried in turn; compared case-insensitively.
_COMPONENT_ORDERS = (("x", "y", "z", "w"), ("r", "g", "b", "a"), ("u", "v", "w"))


@dataclass(frozen=True, eq=False)
class Motion:
    """A frame's motion in the canonical form (module docstring).

    Attributes:
        backward: H x W x 2 float32 pixels to the previous frame (x right, y down).
        forward: the same to the next frame, or None where the pass has none.
        invalid: H x W bool, True where the pass holds NaN or infinite vectors (set to 0).
        layer: the layer (or layers) read, for messages.
        convention: how they were read.
        backward_is_estimated: True when ``backward`` is minus the forward motion.
    """

    backward: np.ndarray
    forward: np.ndarray | None
    invalid: np.ndarray
    layer: str
    convention: MotionConvention

    @property
    def backward_is_estimated(self) -> bool:
        return self.convention.kind == VELOCITY

    @property
    def invalid_count(self) -> int:
        return int(self.invalid.sum())


def get_convention(name: str | MotionConvention) -> MotionConvention:
    """The `MotionConvention` of a name (a key of `CONVENTIONS`).

    Raises:
        MotionPassError: an unknown name (the message names the closest one and all).
    """
    if isinstance(name, MotionConvention):
        return name
    if not isinstance(name, str) or name not in CONVENTIONS:
        hint = did_you_mean(name, CONVENTIONS) if isinstance(name, str) else ""
        raise MotionPassError(
            f"unknown motion convention {name!r}{hint}; expected {one_of(CONVENTIONS)} "
            "('pixels': backward motion in pixels, y down)"
        )
    return CONVENTIONS[name]


def convention_of_layer_name(name: str) -> MotionConvention | None:
    """The convention of a motion layer from its name alone (its full name or its last
    component, as a renderer names the pass), or None when no renderer uses that name."""
    last = name.rsplit(".", 1)[-1].casefold()
    for conv in CONVENTIONS.values():
        names = {n.casefold() for n in conv.layers}
        if last in names or name.casefold() in names:
            return conv
    return None


def parse_motion_layer(spec: str) -> tuple[str, str | None]:
    """``(layer, convention)`` of ``NAME[:CONVENTION]`` (``--motion-layer mv:pixels``);
    the convention is checked, None when not given.

    Raises:
        MotionPassError: an empty name or an unknown convention.
    """
    name, colon, conv = spec.rpartition(":")
    if not colon:
        name, conv = spec, ""
    name = name.strip()
    if not name:
        raise MotionPassError(
            f"motion layer {spec!r} names no layer; expected NAME or NAME:CONVENTION "
            f"(CONVENTION one of {one_of(CONVENTIONS)})"
        )
    if not colon:
        return name, None
    return name, get_convention(conv.strip()).name


def resolve_convention(layer: str | None, conv: str | None) -> MotionConvention | None:
    """The convention a motion layer is read by, checked before any file is read: ``conv``
    when given, else the one its name says (None for the renderers' names looked up per
    file, where ``layer`` is None).

    Raises:
        MotionPassError: an unknown convention, or a layer whose name no renderer gives
            its motion pass with no convention named.
    """
    if conv is not None:
        return get_convention(conv)
    if layer is None:
        return None
    found = convention_of_layer_name(layer)
    if found is None:
        raise MotionPassError(
            f"motion layer '{layer}' is not a name a renderer gives its motion pass; name its "
            f"convention: '{layer}:CONVENTION' (or with motion_convention), CONVENTION one of "
            f"{one_of(CONVENTIONS)}: 'pixels' for backward motion in pixels, y down"
        )
    return found


def _flip_y(xy: np.ndarray, y_up: bool) -> np.ndarray:
    out = np.array(xy[..., :2], dtype=np.float32, copy=True)
    if y_up:
        out[..., 1] = -out[..., 1]
    return out


def convert(
    values: np.ndarray,
    convention: MotionConvention | str,
    *,
    forward_values: np.ndarray | None = None,
    layer: str = "",
) -> Motion:
    """The canonical `Motion` from a pass's values (H x W x C, C as the convention says).

    Raises:
        MotionPassError: wrong shape or channel count (the message says which was expected).
    """
    conv = get_convention(convention)
    values = np.asarray(values, dtype=np.float32)
    if values.ndim != 3 or values.shape[2] not in conv.channels:
        raise MotionPassError(
            f"motion pass {layer or '(values)'} has shape {values.shape}; expected H x W x "
            f"{' or '.join(str(c) for c in conv.channels)} ({conv.describe()})"
        )
    if conv.kind == CYCLES:
        backward = _flip_y(values[..., 0:2], conv.y_up)
        forward = -_flip_y(values[..., 2:4], conv.y_up)
    elif conv.kind == VELOCITY:
        forward = _flip_y(values, conv.y_up)
        backward = -forward
    else:
        backward = _flip_y(values, conv.y_up)
        forward = None
        if forward_values is not None:
            forward_values = np.asarray(forward_values, dtype=np.float32)
            if forward_values.shape[:2] != values.shape[:2] or forward_values.shape[2] < 2:
                raise MotionPassError(
                    f"forward motion pass has shape {forward_values.shape}; expected "
                    f"{(*values.shape[:2], 2)} like the backward one"
                )
            forward = _flip_y(forward_values, conv.y_up)
    invalid = ~np.isfinite(backward).all(axis=-1)
    if forward is not None:
        invalid |= ~np.isfinite(forward).all(axis=-1)
        forward[invalid] = 0.0
    backward[invalid] = 0.0
    return Motion(backward, forward, invalid, layer, conv)


def cycles_vector(backward: np.ndarray, forward: np.ndarray) -> np.ndarray:
    """Blender Cycles' Vector pass (H x W x 4) from canonical backward and forward motion:
    the inverse of `convert` with ``'cycles'``."""
    return np.stack(
        [backward[..., 0], -backward[..., 1], -forward[..., 0], forward[..., 1]], axis=-1
    ).astype(np.float32)


@dataclass(frozen=True)
class MotionPass:
    """Where a file holds its motion: the layer(s) and the convention to read them by."""

    convention: MotionConvention
    layer: Layer
    channels: tuple[str, ...]
    forward_layer: Layer | None = None
    forward_channels: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        names = [self.layer.name or ROOT_LAYER]
        if self.forward_layer is not None:
            names.append(self.forward_layer.name)
        return " + ".join(names)


def _ordered_channels(layer: Layer) -> tuple[str, ...]:
    """The layer's channels in component order (X, Y, Z, W or R, G, B, A or U, V, W)."""
    folded = [c.casefold() for c in layer.components]
    for order in _COMPONENT_ORDERS:
        present = [c for c in order if c in folded]
        if len(present) >= 2 and present == list(order[: len(present)]):
            return tuple(layer.channels[folded.index(c)] for c in present)
    return layer.channels


def _convention_for(layer: Layer) -> MotionConvention | None:
    return convention_of_layer_name(layer.name)


def _pass_for(
    path: Path, layers: Sequence[Layer], layer: Layer, conv: MotionConvention
) -> MotionPass:
    channels = _ordered_channels(layer)
    if len(channels) not in conv.channels:
        raise MotionPassError(
            f"motion pass '{layer.name or ROOT_LAYER}' of '{path}' has channels "
            f"{', '.join(layer.components)}; expected {conv.describe()}"
        )
    forward_layer = None
    for name in conv.forward_layers:
        forward_layer = match_layer(layers, name)
        if forward_layer is not None:
            break
    forward_channels = _ordered_channels(forward_layer) if forward_layer is not None else ()
    if forward_layer is not None and len(forward_channels) not in conv.channels:
        raise MotionPassError(
            f"forward motion pass '{forward_layer.name}' of '{path}' has channels "
            f"{', '.join(forward_layer.components)}; expected {conv.describe()}"
        )
    return MotionPass(conv, layer, channels, forward_layer, forward_channels)


def find_motion_pass(
    path: str | os.PathLike[str],
    layer: str | None = None,
    *,
    convention: str | None = None,
) -> MotionPass | None:
    """The motion pass of a file, or None when it has none.

    Args:
        path: the file (a multi-layer EXR).
        layer: a layer name to use (``--motion-layer``: matched exactly, then
            case-insensitively, then by its last component), or None to look for the
            renderers' names (`oidn_gpu.image.aovs.MOTION_LAYER_NAMES`).
        convention: a key of `CONVENTIONS`; by default the one whose layer name matches.

    Raises:
        MotionPassError: a named layer or convention that does not exist, a layer whose name
            says nothing of its convention with no ``convention``, or wrong channels.
    """
    path = Path(path)
    given = None if convention is None else get_convention(convention)
    layers = list_layers(path)
    if layer is not None:
        found = match_layer(layers, layer)
        if found is None:
            raise MotionPassError(
                f"'{path}' has no layer '{layer}' (motion layer); its layers are "
                f"{describe_layers(layers)}"
            )
        conv = given or _convention_for(found)
        if conv is None:
            resolve_convention(found.name, None)  # raises: the name says no convention
        return _pass_for(path, layers, found, conv)
    for name in aovs.MOTION_LAYER_NAMES:
        found = match_layer(layers, name)
        if found is None:
            continue
        conv = given or _convention_for(found)
        assert conv is not None, name
        return _pass_for(path, layers, found, conv)
    return None


def read_motion(
    path: str | os.PathLike[str],
    layer: str | None = None,
    *,
    convention: str | None = None,
    size: tuple[int, int] | None = None,
) -> Motion:
    """Read a file's motion pass into the canonical form.

    Args:
        path, layer, convention: as `find_motion_pass`.
        size: (height, width) the motion must have (the beauty's), or None.

    Raises:
        MotionPassError: no motion pass (the message lists the names looked for and the
            file's layers), wrong channels, or a size other than ``size``.
    """
    path = Path(path)
    found = find_motion_pass(path, layer, convention=convention)
    if found is None:
        raise MotionPassError(
            f"'{path}' has no motion pass: looked for "
            f"{', '.join(aovs.MOTION_LAYER_NAMES)}; its layers are "
            f"{describe_layers(list_layers(path))} (name one with --motion-layer)"
        )
    values = read_layer(path, ",".join(found.channels)).pixels
    forward = None
    if found.forward_layer is not None:
        forward = read_layer(path, ",".join(found.forward_channels)).pixels
    if size is not None and tuple(values.shape[:2]) != tuple(size):
        raise MotionPassError(
            f"motion pass '{found.name}' of '{path}' is {values.shape[1]}x{values.shape[0]} "
            f"pixels but the color is {size[1]}x{size[0]}; expected the same size"
        )
    return convert(values, found.convention, forward_values=forward, layer=found.name)
