"""Composable AOVs: a beauty and its light-path passes denoised so that the passes still add
up to the beauty (`Denoiser.denoise_aovs`), and an alpha channel denoised (`denoise_alpha`).

Every pass is denoised with the beauty's albedo and normal, in one `Denoiser.denoise_many`
sequence with the beauty (overlapped on the wgpu backend); then the passes of the sum are
adjusted by the sum rule (`oidn_gpu.image.aov_sum.reconcile`, docs/aovs.md). Passes not in
the sum (utility passes: depth, masks) are denoised and left as they are.

An alpha channel is denoised as a one-channel LDR image: replicated to RGB and denoised once
with the fast (``quality="fast"``) LDR weights, the frame's albedo and normal as auxiliary
images; the channels' mean, clipped to 0..1, is the denoised alpha.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from oidn_gpu.config import DenoiserConfig
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.aov_sum import reconcile

ALPHA_MODES = ("copy", "denoise")

# The alpha denoiser of each denoiser, made on first use and dropped with it.
_ALPHA_DENOISERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass(frozen=True)
class AovResult:
    """What `Denoiser.denoise_aovs` returns: the denoised beauty and passes (float32, each
    of its input's shape), the passes in the order given."""

    beauty: np.ndarray
    passes: dict[str, np.ndarray]


def alpha_config(config: DenoiserConfig) -> DenoiserConfig:
    """The config that denoises an alpha channel: the backend of ``config``, the ``RT``
    filter on linear LDR with the fast weights (no custom weights, no prefilter)."""
    fast = dataclasses.replace(
        config.filter,
        filter_type="RT",
        hdr=False,
        srgb=False,
        clean_aux=False,
        quality="fast",
        input_scale=None,
        directional=False,
        prefilter="none",
        weights=None,
    )
    return dataclasses.replace(config, filter=fast)


def denoise_alpha(denoiser: Any, alpha: Any, albedo: Any = None, normal: Any = None) -> np.ndarray:
    """``alpha`` (``H x W`` or ``H x W x 1``) denoised by ``denoiser`` (one made from
    `alpha_config`): replicated to RGB, denoised once, the mean of the channels clipped to
    0..1; returned float32 in the shape given."""
    values = np.asarray(alpha, dtype=np.float32)
    if values.ndim == 3 and values.shape[2] == 1:
        plane = values[:, :, 0]
    elif values.ndim == 2:
        plane = values
    else:
        raise InvalidArgumentError(
            f"the alpha image is {values.shape}; expected H x W or H x W x 1"
        )
    rgb = np.repeat(np.clip(plane, 0.0, 1.0)[:, :, None], 3, axis=2)
    denoised = np.asarray(denoiser.denoise(rgb, albedo, normal), dtype=np.float32)
    result = np.clip(denoised.mean(axis=2), 0.0, 1.0).astype(np.float32)
    return result.reshape(values.shape)


def _alpha_denoiser(denoiser: Any) -> Any:
    made = _ALPHA_DENOISERS.get(denoiser)
    if made is None:
        made = type(denoiser).from_config(alpha_config(denoiser.config))
        _ALPHA_DENOISERS[denoiser] = made
    return made


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
            ``"denoise"`` denoises it (`denoise_alpha`, the fast LDR weights).

    Returns:
        `AovResult`: the denoised beauty and passes; the ``summed`` passes add up to the
        beauty's colour channels exactly, float32 rounding aside (docs/aovs.md).

    Raises:
        InvalidArgumentError: a bad ``alpha``, an unknown ``summed`` name, images of other
            sizes, or a summed pass whose colour channels are not the beauty's; and the
            errors of `Denoiser.denoise`.
    """
    if alpha not in ALPHA_MODES:
        raise InvalidArgumentError(f"alpha is {alpha!r}; expected one of {ALPHA_MODES}")
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
        denoised_beauty[:, :, 3] = denoise_alpha(
            _alpha_denoiser(denoiser), image[:, :, 3], albedo, normal
        )
    shapes = {name: np.asarray(passes[name]).shape for name in images}
    return AovResult(
        beauty=denoised_beauty.reshape(np.asarray(beauty).shape),
        passes={name: values.reshape(shapes[name]) for name, values in denoised.items()},
    )
