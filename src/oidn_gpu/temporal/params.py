"""`TemporalParams`: the temporal mode's parameters (OIDN-style names) and their checks."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

CLAMPS = ("minmax", "variance", "none")
MAX_DISOCCLUSION_MARGIN = 64  # pixels


@dataclass(frozen=True)
class TemporalParams:
    """The temporal mode's parameters (OIDN-style names).

    Attributes:
        history: frames of noisy input averaged at most (1: none, per-frame input).
        output_blend: the least weight of the current denoised frame in the output blend,
            in (0, 1] (1: no output blend).
        clamp: ``"minmax"``, ``"variance"`` or ``"none"``: how the reprojected output is
            clamped to the current denoised frame's neighbourhood.
        clamp_radius: the neighbourhood is ``(2 r + 1)^2`` pixels (1: 3x3).
        clamp_gamma: standard deviations of the ``"variance"`` clamp.
        depth_tolerance: relative depth difference beyond which history is rejected.
        normal_tolerance: ``1 - cos`` of the normals' angle beyond which it is rejected.
        albedo_tolerance: largest albedo channel difference for which it is kept.
        cut_threshold: fraction of pixels rejected at which a frame counts as a camera
            cut and the history restarts.
        change_sigmas: the noisy input's history is dropped where the frame's local mean
            differs from the reprojected output's by more than this many standard errors
            (lighting changes; 0: off).
        change_output_history: where that test fires, the output blend's history is cut
            to this many frames (the denoised frame weighs at least one over it) rather
            than dropped, so that a false alarm of the test on noise does not flicker
            (1: dropped).
        firefly_ratio: a new color brighter than this many times its pixel's history is
            scaled down to it before the network sees it, so that a firefly in one frame
            does not become a blob: the accumulated input where it holds 2 frames or more,
            else the previous temporal output reprojected (0: off).
        subpixel_tolerance: the noisy input is accumulated only where the motion is
            within this many pixels of whole pixels (0.5: everywhere); resampled noise is
            correlated, which the network keeps as detail.
        disocclusion_margin: the noisy input's history is also dropped within this many
            pixels of a pixel whose history was rejected (a disocclusion, an edge coming
            on screen), so that the network sees a newly visible surface beside input of
            the same noise level rather than much cleaner accumulated surroundings (it
            then denoises it less); the output blend keeps its history there (0: off).
        use_depth, use_normal, use_albedo: which guide channels exist (set per sequence
            from the images given).
    """

    history: int = 8
    output_blend: float = 0.3
    clamp: str = "variance"
    clamp_radius: int = 2
    clamp_gamma: float = 3.0
    depth_tolerance: float = 0.05
    normal_tolerance: float = 0.1
    albedo_tolerance: float = 0.1
    cut_threshold: float = 0.9
    change_sigmas: float = 2.0
    change_output_history: float = 1.5
    firefly_ratio: float = 8.0
    subpixel_tolerance: float = 0.05
    disocclusion_margin: int = 16
    use_depth: bool = True
    use_normal: bool = True
    use_albedo: bool = True

    names: ClassVar[tuple[str, ...]] = (
        "history",
        "output_blend",
        "clamp",
        "clamp_radius",
        "clamp_gamma",
        "depth_tolerance",
        "normal_tolerance",
        "albedo_tolerance",
        "cut_threshold",
        "subpixel_tolerance",
        "firefly_ratio",
        "change_sigmas",
        "change_output_history",
        "disocclusion_margin",
    )

    def __post_init__(self) -> None:
        _check_int("history", self.history, 1, 1 << 20)
        _check_int("clamp_radius", self.clamp_radius, 0, 8)
        _check_int("disocclusion_margin", self.disocclusion_margin, 0, MAX_DISOCCLUSION_MARGIN)
        if not (isinstance(self.output_blend, (int, float)) and self.output_blend > 0):
            raise InvalidArgumentError(
                f"temporal output_blend is {self.output_blend!r}; expected a number in (0, 1]"
            )
        if self.clamp not in CLAMPS:
            raise InvalidArgumentError(
                f"temporal clamp {self.clamp!r} is not one of {', '.join(map(repr, CLAMPS))}"
            )
        for name, top in (
            ("output_blend", 1.0),
            ("clamp_gamma", 100.0),
            ("depth_tolerance", 1e30),
            ("normal_tolerance", 2.0),
            ("albedo_tolerance", 1e30),
            ("cut_threshold", 1.0),
            ("change_sigmas", 100.0),
            ("firefly_ratio", 1e30),
            ("subpixel_tolerance", 0.5),
            ("change_output_history", 1e6),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise InvalidArgumentError(f"temporal {name} is {value!r}; expected a number")
            if not 0.0 <= float(value) <= top:
                raise InvalidArgumentError(
                    f"temporal {name} is {value!r}; expected a number in [0, {top:g}]"
                )
        if self.change_output_history < 1:
            raise InvalidArgumentError(
                f"temporal change_output_history is {self.change_output_history!r}; expected "
                "a number of frames >= 1"
            )

    def with_guides(self, *, depth: bool, normal: bool, albedo: bool) -> TemporalParams:
        """These parameters with the guide channels that a sequence has."""
        return dataclasses.replace(self, use_depth=depth, use_normal=normal, use_albedo=albedo)


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, np.integer))
        or not (low <= value <= high)
    ):
        raise InvalidArgumentError(
            f"temporal {name} is {value!r}; expected an integer in [{low}, {high}]"
        )
