"""An alpha channel's coverage fitted to the frame's albedo (a guided filter).

A noisy alpha's noise is coverage noise: on a silhouette each of a pixel's few samples hit
the object or missed it. Where the albedo was rendered with more samples (as renderers
write their denoising passes), it carries the same coverage with less noise: across an
edge of one object over an empty background the albedo is the object's albedo times the
coverage, a linear function of the alpha. The guided filter of He, Sun and Tang ("Guided
Image Filtering", ECCV 2010, section 3) fits the alpha in every window of
``2 * COVERAGE_RADIUS + 1`` pixels as an affine function of the guide's three channels (ridge
regularised by `COVERAGE_EPS`), and returns at each pixel the mean of the fits of the
windows that hold it. Where the guide shares the alpha's samples, the fit returns the alpha
with its noise (nothing is lost, nothing gained); where the alpha is constant over a
window of twice the radius, it is returned as it is.

`fit_coverage` works on NumPy arrays, over the tiles where the alpha is not constant;
`fit_coverage_tensor` does the same arithmetic on torch tensors (imported only then),
over the whole image. Both read the image edge-extended by twice the radius.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

# Chosen on the frames of bench/alpha_quality.py (radius 2 to 5, eps 1e-4 to 1e-2): radius 3
# and eps 1e-4 (the albedo's variance in 0..1 units) lower the error of every frame whose
# albedo is rendered apart 3x or more, and change nothing where it shares the alpha's samples.
COVERAGE_RADIUS = 3
COVERAGE_EPS = 1e-4
# The NumPy path's tile (pixels a side): a tile is fitted only when the alpha varies in it
# or within twice the radius of it.
TILE = 64
# Tiles fitted at once (their arrays stay in the caches), chunks spread over the cores.
CHUNK = 8
# Subtracted from the alpha and the guide (0..1) before the fit and added back after: the fit
# is the same, and the products it averages are 4x smaller, so float32 loses less of the
# small covariances (mean of products minus product of means).
CENTRE = 0.5
# The six distinct products of the guide's channels (row, column of the symmetric 3 x 3).
_PAIRS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def _fit_planes(means: list[Any], eps: float) -> tuple[list[Any], Any]:
    """The affine fit ``alpha ~ a . guide + b`` of every window from its means: ``means``
    holds the guide's three channel means, the alpha's mean, the three means of guide times
    alpha and the six of `_PAIRS`' products (planes of any array type with arithmetic);
    returns the three planes of ``a`` and the plane of ``b``. The 3 x 3 system
    ``(cov(guide) + eps) a = cov(guide, alpha)`` is solved by its adjugate."""
    g, p, gp, gg = means[0:3], means[3], means[4:7], means[7:13]
    s = {pair: gg[k] - g[pair[0]] * g[pair[1]] for k, pair in enumerate(_PAIRS)}
    a00, a01, a02 = s[0, 0] + eps, s[0, 1], s[0, 2]
    a11, a12, a22 = s[1, 1] + eps, s[1, 2], s[2, 2] + eps
    c = [gp[i] - g[i] * p for i in range(3)]
    # The adjugate of the symmetric matrix, row by row.
    i00, i01, i02 = a11 * a22 - a12 * a12, a02 * a12 - a01 * a22, a01 * a12 - a02 * a11
    i11, i12, i22 = a00 * a22 - a02 * a02, a01 * a02 - a00 * a12, a00 * a11 - a01 * a01
    det = a00 * i00 + a01 * i01 + a02 * i02
    a = [
        (i00 * c[0] + i01 * c[1] + i02 * c[2]) / det,
        (i01 * c[0] + i11 * c[1] + i12 * c[2]) / det,
        (i02 * c[0] + i12 * c[1] + i22 * c[2]) / det,
    ]
    b = p - a[0] * g[0] - a[1] * g[1] - a[2] * g[2]
    return a, b


def _box(x: np.ndarray, radius: int) -> np.ndarray:
    """Means of ``x`` (``... x H x W``) over full windows of ``2 * radius + 1`` pixels a
    side: ``... x (H - 2 radius) x (W - 2 radius)`` (sums of shifted slices, which keep
    float32's precision where a running sum would not)."""
    k = 2 * radius + 1
    h, w = x.shape[-2] - k + 1, x.shape[-1] - k + 1
    rows = x[..., 0:h, :].copy()
    for d in range(1, k):
        rows += x[..., d : d + h, :]
    out = rows[..., 0:w].copy()
    for d in range(1, k):
        out += rows[..., d : d + w]
    out *= np.float32(1.0 / (k * k))
    return out


def _guide3(guide: Any) -> Any:
    """The guide's first three channels (a one-channel guide repeated)."""
    if guide.ndim == 2:
        guide = guide[:, :, None]
    if guide.shape[2] >= 3:
        return guide[:, :, :3]
    return guide[:, :, :1].repeat(3, 2)  # NumPy and torch: repeat along axis 2


def _active_tiles(padded: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """``rows x cols`` flags: whether the alpha may vary over a tile's window (``padded``
    holds the alpha extended by the halo, with at least ``(rows + 1) x (cols + 1)`` whole
    tiles). A tile's window (the tile and its halo, smaller than two tiles a side) lies in
    the 2 x 2 tiles of ``padded`` from its own: flagged where their extremes differ."""
    blocks = padded[: (rows + 1) * TILE, : (cols + 1) * TILE].reshape(
        rows + 1, TILE, cols + 1, TILE
    )
    lo, hi = blocks.min(axis=(1, 3)), blocks.max(axis=(1, 3))
    lo = np.minimum(np.minimum(lo[:-1, :-1], lo[1:, :-1]), np.minimum(lo[:-1, 1:], lo[1:, 1:]))
    hi = np.maximum(np.maximum(hi[:-1, :-1], hi[1:, :-1]), np.maximum(hi[:-1, 1:], hi[1:, 1:]))
    return lo != hi


def fit_coverage(alpha: np.ndarray, guide: np.ndarray) -> np.ndarray:
    """``alpha`` (``H x W``) fitted to ``guide`` (``H x W x C``, the frame's albedo):
    float32 ``H x W``, the alpha itself where it is constant within twice the radius."""
    alpha = np.asarray(alpha, dtype=np.float32)
    guide = _guide3(np.asarray(guide, dtype=np.float32))
    h, w = alpha.shape
    halo = 2 * COVERAGE_RADIUS
    rows, cols = -(-h // TILE), -(-w // TILE)
    # Edge-extended by the halo, and to whole tiles past the last one (`_active_tiles`).
    extend = ((halo, (rows + 1) * TILE - h - halo), (halo, (cols + 1) * TILE - w - halo))
    p = np.pad(alpha, extend, mode="edge")
    g = np.pad(guide.transpose(2, 0, 1), ((0, 0), *extend), mode="edge") - np.float32(CENTRE)
    active = np.argwhere(_active_tiles(p, rows, cols))
    result = alpha.copy()
    chunks = [active[i : i + CHUNK] for i in range(0, len(active), CHUNK)]
    if len(chunks) > 1:  # NumPy's arithmetic releases the GIL: chunks on the cores
        with ThreadPoolExecutor(min(len(chunks), os.cpu_count() or 1)) as pool:
            list(pool.map(lambda chunk: _fit_tiles(p, g, chunk, result), chunks))
    elif chunks:
        _fit_tiles(p, g, chunks[0], result)
    return result


def _fit_tiles(p: np.ndarray, g: np.ndarray, tiles: np.ndarray, result: np.ndarray) -> None:
    """Fit the ``tiles`` (rows of tile row, column) of the padded alpha ``p`` (``g``: the
    padded guide, centred, channels first) into ``result``."""
    halo = 2 * COVERAGE_RADIUS
    side = TILE + 2 * halo
    h, w = result.shape
    ps = np.stack([p[y * TILE : y * TILE + side, x * TILE : x * TILE + side] for y, x in tiles])
    gs = np.stack([g[:, y * TILE : y * TILE + side, x * TILE : x * TILE + side] for y, x in tiles])
    pe = ps[:, None] - np.float32(CENTRE)
    products = [gs[:, i : i + 1] * gs[:, j : j + 1] for i, j in _PAIRS]
    means = _box(np.concatenate([gs, pe, gs * pe, *products], axis=1), COVERAGE_RADIUS)
    a, b = _fit_planes(list(means.transpose(1, 0, 2, 3)), COVERAGE_EPS)
    ab = _box(np.stack([*a, b], axis=1), COVERAGE_RADIUS)
    inner = gs[:, :, halo:-halo, halo:-halo]
    fitted = (ab[:, :3] * inner).sum(axis=1) + ab[:, 3] + np.float32(CENTRE)
    for (y, x), tile in zip(tiles, fitted, strict=True):
        y0, x0 = y * TILE, x * TILE
        result[y0 : y0 + TILE, x0 : x0 + TILE] = tile[: h - y0, : w - x0]


def fit_coverage_tensor(alpha: Any, guide: Any) -> Any:
    """`fit_coverage` of torch tensors (``H x W`` alpha, ``H x W x C`` guide) on their
    device: a float32 ``H x W`` tensor (the whole image fitted; float64 for a float64
    alpha). Where the runner has its own kernels (`CoverageRunner`) they are used instead."""
    import torch
    import torch.nn.functional as F  # noqa: N812 - torch's usual alias

    halo, k = 2 * COVERAGE_RADIUS, 2 * COVERAGE_RADIUS + 1
    dtype = torch.float64 if alpha.dtype == torch.float64 else torch.float32
    g = _guide3(guide.to(dtype)).permute(2, 0, 1) - CENTRE
    p = alpha.to(dtype)[None] - CENTRE
    products = [g[i : i + 1] * g[j : j + 1] for i, j in _PAIRS]
    stacked = torch.cat([g, p, g * p, *products])[None]
    stacked = F.pad(stacked, (halo, halo, halo, halo), mode="replicate")
    means = F.avg_pool2d(stacked, k, stride=1)[0]
    a, b = _fit_planes(list(means), COVERAGE_EPS)
    ab = F.avg_pool2d(torch.stack([*a, b])[None], k, stride=1)[0]
    return (ab[:3] * g).sum(0) + ab[3] + CENTRE
