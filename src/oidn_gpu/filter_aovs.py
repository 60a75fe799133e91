"""Composable AOVs: a beauty and its light-path passes denoised so that the passes still add
up to the beauty (`Denoiser.denoise_aovs`), with the beauty's alpha copied or denoised.

Every pass is denoised with the beauty's albedo and normal, in one `Denoiser.denoise_many`
sequence with the beauty (overlapped on the wgpu backend); then the passes of the sum are
adjusted by the sum rule (`oidn_gpu.image.aov_sum.reconcile`, docs/aovs.md). Passes not in
the sum (utility passes: depth, masks) are denoised and left as they are.

With ``alpha="denoise"`` the beauty's alpha is denoised as `Denoiser.denoise` does it
(`oidn_gpu.filter_alpha`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter_alpha import check_alpha_mode, denoise_alpha
from oidn_gpu.image.aov_sum import reconcile


@dataclass(frozen=True)
class AovResult:
    """What `Denoiser.denoise_aovs` returns: the denoised beauty and passes (float32, each
    of its input's shape), the passes in the order given."""

    beauty: np.ndarray
    passes: dict[str, np.ndarray]


def _image(name: str, value: Any) -> np.ndarray:
    image = np.asarray(value, dtype=np.float32)
    if image.ndim == 2:
        image = image[:, :, None]
    if image.ndim != 3 or not 1 <= image.shape[2] <= 4:
        raise InvalidArgumentError(
            f"{name} is {np.shape(value)}; expected an H x W or H x W x C image, C 1..4"
        )
    return image


def _summed_names(passes: Mapping[str, Any], summed: Iterable[str] | None) -> list[str]:
    if summed is None:
        return list(passes)
    names = list(dict.fromkeys(summed))
    unknown = [n for n in names if n not in passes]
    if unknown:
        raise InvalidArgumentError(
            f"summed names {unknown} are not among the passes; expected some of {list(passes)}"
        )
    return names


def denoise_aovs(
    denoiser: Any,
    beauty: Any,
    passes: Mapping[str, Any],
    albedo: Any = None,
    normal: Any = None,
    *,
    summed: Iterable[str] | None = None,
    alpha: str = "copy",
) -> AovResult:
    """Denoise a beauty and its light-path passes so that the passes sum to the beauty.

    Args:
        beauty: the noisy beauty, ``H x W x C`` (C 1..4; a 4th channel is alpha), images
            as `Denoiser.denoise` takes them (read into host float32 arrays).
        passes: ``{name: image}``, each of the beauty's size; the passes of the sum have
            the beauty's colour channels (an alpha channel of a pass is passed through).
        albedo, normal: the beauty's auxiliary images, used for every pass.
        summed: the names of the passes whose sum is the beauty (None: all of them);
            the others (utility passes) are denoised and not adjusted.
        alpha: ``"copy"`` passes the beauty's alpha through, as `Denoiser.denoise` does;
            ``"denoise"`` denoises it (`oidn_gpu.filter_alpha`, the fast LDR weights).

    Returns:
        `AovResult`: the denoised beauty and passes; the ``summed`` passes add up to the
        beauty's colour channels exactly, float32 rounding aside (docs/aovs.md).

    Raises:
        InvalidArgumentError: a bad ``alpha``, an unknown ``summed`` name, images of other
            sizes, or a summed pass whose colour channels are not the beauty's; and the
            errors of `Denoiser.denoise`.
    """
    check_alpha_mode(alpha)
    if not isinstance(passes, Mapping):
        raise InvalidArgumentError(
            f"the passes are a {type(passes).__name__}; expected a mapping of name to image"
        )
    image = _image("the beauty", beauty)
    names = _summed_names(passes, summed)
    images = {name: _image(f"pass '{name}'", value) for name, value in passes.items()}
    colour = 3 if image.shape[2] == 4 else image.shape[2]
    for name, values in images.items():
        if values.shape[:2] != image.shape[:2]:
            raise InvalidArgumentError(
                f"pass '{name}' is {values.shape[1]}x{values.shape[0]} px; expected the "
                f"beauty's {image.shape[1]}x{image.shape[0]}"
            )
        if name in names and min(values.shape[2], 3) != colour:
            raise InvalidArgumentError(
                f"pass '{name}' has {values.shape[2]} channels; a pass of the sum has the "
                f"beauty's {colour} colour channels (and maybe alpha)"
            )
    frames = [(image, albedo, normal)] + [(v, albedo, normal) for v in images.values()]
    results = [_image("a result", r) for r in denoiser.denoise_many(frames)]
    denoised_beauty, denoised = results[0], dict(zip(images, results[1:], strict=True))
    if names:
        parts = reconcile(
            denoised_beauty[:, :, :colour], [denoised[n][:, :, :colour] for n in names]
        )
        for name, part in zip(names, parts, strict=True):
            denoised[name] = np.concatenate([part, denoised[name][:, :, colour:]], axis=2)
    if alpha == "denoise" and image.shape[2] == 4:
        denoised_beauty[:, :, 3] = denoise_alpha(denoiser._alpha_denoiser(), image[:, :, 3], albedo)
    shapes = {name: np.asarray(passes[name]).shape for name in images}
    return AovResult(
        beauty=denoised_beauty.reshape(np.asarray(beauty).shape),
        passes={name: values.reshape(shapes[name]) for name, values in denoised.items()},
    )
