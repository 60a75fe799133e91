"""OIDN's checks of one call's input images (its error messages): `validate_images`
checks the color, albedo and normal together and splits the color's alpha off."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError, channels_first_hint

# OIDN rejects images wider or taller than this (api/api.cpp, "image size is too large").
MAX_IMAGE_DIM = 65536


@dataclass(frozen=True)
class Images:
    """Validated inputs: float32 RGB-broadcastable arrays, plus the color's alpha.

    ``rgba`` is the main image as given (``H x W x 4``) where it had an alpha, else None:
    ``color`` and ``alpha`` are its views.
    """

    color: np.ndarray | None
    albedo: np.ndarray | None
    normal: np.ndarray | None
    main_channels: int
    alpha: np.ndarray | None
    height: int
    width: int
    dtype: np.dtype
    rgba: Any = None


def check_image(name: str, image: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """Validate one image; returns (pixels with at most 3 channels, alpha or None)."""
    if not isinstance(image, np.ndarray):
        raise InvalidOperationError(
            f"unsupported input image format: {name} is a {type(image).__name__}; "
            "expected a numpy array"
        )
    if image.dtype not in (np.float32, np.float16):
        raise InvalidOperationError(
            f"unsupported input image format: {name} has dtype {image.dtype}; "
            "expected float32 or float16"
        )
    return split_alpha(name, image)


def split_alpha(name: str, image: Any) -> tuple[Any, Any]:
    """Check the shape of one image (a NumPy array or a tensor); returns (pixels with at
    most 3 channels, alpha or None), views of ``image``."""
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3 or not 1 <= image.shape[2] <= 4:
        raise InvalidOperationError(
            f"unsupported input image format: {name} has shape {image.shape}; "
            "expected HxW or HxWxC with C from 1 to 4" + channels_first_hint(tuple(image.shape))
        )
    h, w = image.shape[:2]
    if h > MAX_IMAGE_DIM or w > MAX_IMAGE_DIM:
        raise InvalidArgumentError(
            f"image size is too large: {name} is {w}x{h}; at most {MAX_IMAGE_DIM} per side"
        )
    if image.shape[2] == 4:
        return image[:, :, :3], image[:, :, 3]
    return image, None


def validate_images(color: Any, albedo: Any, normal: Any, check: Any = check_image) -> Images:
    named = (("color", color), ("albedo", albedo), ("normal", normal))
    given = {n: a for n, a in named if a is not None}
    if not given:
        raise InvalidOperationError("input image not specified")
    checked = {n: check(n, a) for n, a in given.items()}
    main_name = next(iter(checked))
    main, alpha = checked[main_name]
    h, w = main.shape[:2]
    for name, (pixels, _) in checked.items():
        if pixels.shape[:2] != (h, w):
            raise InvalidOperationError(
                f"image size mismatch: {name} is {pixels.shape[1]}x{pixels.shape[0]}, "
                f"{main_name} is {w}x{h}"
            )
    return Images(
        color=checked["color"][0] if "color" in checked else None,
        albedo=checked["albedo"][0] if "albedo" in checked else None,
        normal=checked["normal"][0] if "normal" in checked else None,
        main_channels=main.shape[2] + (1 if alpha is not None else 0),
        alpha=alpha,
        height=h,
        width=w,
        dtype=given[main_name].dtype,
        rgba=given[main_name] if alpha is not None else None,
    )
