"""Temporal mode over frame files: the motion and depth passes of each frame, its number,
and one `TemporalDenoiser` per denoiser of a run (the command line's ``--temporal``).

A frame's motion pass is found as `oidn_gpu.image.motion` finds it (the renderers' names in
docs/aovs.md, or ``--motion-layer``), its depth pass under `DEPTH_LAYER_NAMES`; the frame
number is the last group of digits in the file name (``shot.0042.exr`` -> 42), so a gap in
the numbering restarts the history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu import sequence
from oidn_gpu.image import io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.temporal.denoiser import TemporalDenoiser

# One-channel depth layers: Blender's Depth (channel Z), Arnold's and Karma's Z.
DEPTH_LAYER_NAMES = ("Depth", "Z", "depth")
_NUMBER = re.compile(r"(\d+)(?!.*\d)")


def frame_number(path: Path) -> int | None:
    """The last group of digits in the file name's stem, or None."""
    match = _NUMBER.search(Path(path).stem)
    return int(match.group(1)) if match else None


def read_depth(path: Path, layers: Any = None) -> np.ndarray | None:
    """The file's depth pass (H x W float32), or None when it has none."""
    layers = io.list_layers(path) if layers is None else layers
    for name in DEPTH_LAYER_NAMES:
        layer = io.match_layer(layers, name)
        if layer is not None and len(layer.channels) == 1:
            pixels = io.read_layer(path, layer.channels[0]).pixels
            return np.ascontiguousarray(pixels.reshape(pixels.shape[:2]), np.float32)
    return None


@dataclass
class TemporalFrames:
    """The temporal state of one run: a `TemporalDenoiser` per `oidn_gpu.Denoiser`.

    Attributes:
        params: `TemporalDenoiser` parameters (``history``, ``output_blend``, ...).
        motion_layer: the motion pass's layer, or None to find it by name.
    """

    params: dict[str, Any] = field(default_factory=dict)
    motion_layer: str | None = None
    _denoisers: dict[int, TemporalDenoiser] = field(default_factory=dict)

    def denoise(self, path: Path, frame: Any, denoiser: Any) -> tuple[np.ndarray, list[str]]:
        """The temporal result of one loaded frame (`sequence.LoadedFrame`) of ``path``:
        ``(H x W x C float32, messages)``; the messages say where the history restarted
        (other than at the first frame).

        Raises:
            oidn_gpu.image.motion.MotionPassError: the file has no motion pass, or one of
                another size.
            InvalidArgumentError: no depth, albedo or normal to reject history by.
        """
        color = frame.color.pixels
        height, width = color.shape[:2]
        motion = motion_passes.read_motion(path, self.motion_layer, size=(height, width))
        vectors = np.where(motion.invalid[..., None], np.float32(np.nan), motion.backward)
        depth = read_depth(path, frame.layers)
        if depth is not None and depth.shape != (height, width):
            raise InvalidArgumentError(
                f"the depth pass of '{path}' is {depth.shape[1]}x{depth.shape[0]}; expected "
                f"the color's size {width}x{height}"
            )
        temporal = self._denoisers.get(id(denoiser))
        if temporal is None:
            temporal = self._denoisers[id(denoiser)] = TemporalDenoiser(denoiser, **self.params)
        seen = len(temporal.restarts)
        rgb = color[:, :, :3] if color.shape[2] >= 3 else np.repeat(color[:, :, :1], 3, axis=2)
        result = temporal.denoise(rgb, frame.albedo, frame.normal, motion=vectors, depth=depth,
                                  frame=frame_number(path))
        messages = [
            f"temporal history restarts: {r.reason}"
            for r in temporal.restarts[seen:]
            if r.index > 0
        ]
        return result[:, :, : color.shape[2]], messages

    def warm_up(self, job: Any, pool: Any, options: Any) -> None:
        """Denoise one frame (a `sequence.FrameJob`, with `sequence.SequenceOptions`) for
        its history only: nothing is written."""
        frame = sequence.load_frame(job, options.inputs, lightmap=pool.config.lightmap)
        hdr, srgb = sequence.resolve_mode(options.inputs, frame.color)
        self.denoise(job.color, frame, pool.get(hdr, srgb))

    def close(self) -> None:
        """Forget every history and release the passes (the denoisers belong to the
        caller); the object can be used again."""
        for temporal in self._denoisers.values():
            temporal.close()
        self._denoisers.clear()
