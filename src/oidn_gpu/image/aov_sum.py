"""The sum rule of light-path AOVs: denoised passes adjusted to add up to the denoised beauty.

A renderer's light-path passes (diffuse/specular, direct/indirect, light groups) add up to
its beauty. Denoised one by one they no longer do: each pass loses different noise. `reconcile`
spreads the difference ``r = B - sum_i P_i`` (per pixel and channel) over the passes in
proportion to their denoised magnitudes::

    w_i = (|P_i| + eps) / sum_j (|P_j| + eps)        P_i' = P_i + w_i r

so that ``sum_i P_i' = B``. Among all corrections that restore the sum, this one has the
least ``sum_i (P_i' - P_i)^2 / w_i``: each pass moves in proportion to its own size, so a
pass that is nearly black at a pixel stays nearly black there. Where the passes are all
non-negative (and so is the beauty) it is a per-pixel rescale, ``P_i' = P_i B / sum_j P_j``,
and keeps them non-negative. Negative values (a renderer's negative lobes, a pass written as
a difference) weigh by their magnitude. ``eps`` (a millionth of the beauty's mean magnitude
in that channel) makes passes that are all about zero at a pixel share the difference evenly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from oidn_gpu.errors import InvalidArgumentError

# Passes below this fraction of the beauty's mean magnitude count as zero for the weights.
ZERO_FRACTION = 1e-6


def reconcile(beauty: np.ndarray, passes: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The passes adjusted to sum to ``beauty`` exactly (float32 rounding aside).

    Args:
        beauty: the denoised beauty, ``H x W x C``.
        passes: the denoised passes that make up the beauty, each ``H x W x C``.

    Returns:
        The adjusted passes, float32, in the order given.

    Raises:
        InvalidArgumentError: no pass, or a pass whose shape is not the beauty's.
    """
    beauty64 = np.asarray(beauty, dtype=np.float64)
    if not passes:
        raise InvalidArgumentError("no pass to reconcile with the beauty; expected at least one")
    for index, values in enumerate(passes):
        if np.shape(values) != beauty64.shape:
            raise InvalidArgumentError(
                f"pass {index} is {np.shape(values)}; expected the beauty's shape {beauty64.shape}"
            )
    stack = np.stack([np.asarray(p, dtype=np.float64) for p in passes])
    finite_beauty = np.where(np.isfinite(beauty64), beauty64, 0.0)
    scale = np.abs(finite_beauty).mean(axis=tuple(range(beauty64.ndim - 1)))
    eps = ZERO_FRACTION * scale + np.finfo(np.float32).tiny
    magnitude = np.abs(stack) + eps
    weights = magnitude / magnitude.sum(axis=0)
    residual = beauty64 - stack.sum(axis=0)
    adjusted = (stack + weights * residual).astype(np.float32)
    # float32 rounding: what is left goes to the pass of largest weight at each pixel
    left = beauty64 - adjusted.astype(np.float64).sum(axis=0)
    largest = np.argmax(weights, axis=0)[None]
    fixed = np.take_along_axis(adjusted, largest, axis=0).astype(np.float64) + left[None]
    np.put_along_axis(adjusted, largest, fixed.astype(np.float32), axis=0)
    return list(adjusted)
