"""Input/output processing against per-element float32 formulas written from the spec."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image.process import (
    Mode,
    broadcast_rgb,
    build_input,
    finish_output,
    mode_for,
)
from oidn_gpu.image.transfer import Transfer, forward, inverse

F = np.float32
FLT_MAX = F(np.finfo(np.float32).max)


def special_values(rng: np.random.Generator, n: int = 300) -> np.ndarray:
    """NaN, +-Inf, negatives, huge, zero, denormals and ordinary values, float32."""
    special = [
        np.nan,
        np.inf,
        -np.inf,
        -1e30,
        -2.0,
        -1.0,
        -0.5,
        -1e-40,
        -0.0,
        0.0,
        1e-45,
        1e-40,
        1e-8,
        0.002,
        0.5,
        1.0,
        1.5,
        100.0,
        65504.0,
        1e30,
        float(FLT_MAX),
    ]
    rest = np.concatenate(
        [
            rng.uniform(-2, 2, n // 3),
            np.exp(rng.uniform(-30, 30, n // 3)),
            rng.standard_normal(n - 2 * (n // 3)) * 10,
        ]
    )
    return np.concatenate([special, rest]).astype(np.float32)


def scalar_main(v: np.float32, mode: Mode) -> np.float32:
    """Section 4.5 for one value: scale, NaN->0, clamp, snorm affine (transfer after)."""
    with np.errstate(all="ignore"):
        v = v * F(mode.input_scale)
        if np.isnan(v):
            v = F(0)
        lo = F(-1) if mode.snorm else F(0)
        hi = FLT_MAX if mode.hdr else F(1)
        v = min(max(v, lo), hi)
        if mode.snorm:
            v = v * F(0.5) + F(0.5)
    return F(v)


def scalar_output(rgb: np.ndarray, mode: Mode, channels: int) -> np.ndarray:
    """Section 5 for one pixel; the inverse transfer is applied per value."""
    with np.errstate(all="ignore"):
        v = [F(0) if np.isnan(c) else F(min(max(c, F(0)), FLT_MAX)) for c in rgb]
        v = [F(inverse(mode.transfer, np.array([c], np.float32))[0]) for c in v]
        if channels == 1:
            v = [((v[0] + v[1]) + v[2]) * F(0.33333334)]
        if mode.snorm:
            v = [max(c * F(2) - F(1), F(-1)) for c in v]
        if not mode.hdr:
            v = [min(c, F(1)) for c in v]
        v = [c * F(mode.output_scale) for c in v]
    return np.array(v[:channels], dtype=np.float32)


MODES = [
    mode_for("RT", hdr=True, input_scale=1.0),
    mode_for("RT", hdr=True, input_scale=0.37),
    mode_for("RT", hdr=True, input_scale=1e30),
    mode_for("RT", input_scale=0.5),
    mode_for("RT", srgb=True),
    mode_for("RT", normal_only=True, input_scale=0.7),
    mode_for("RTLightmap", input_scale=2.0),
    mode_for("RTLightmap", directional=True, input_scale=0.5),
    mode_for("RT", hdr=True, input_scale=0.0),
    mode_for("RT", hdr=True, input_scale=-1.5),
]


def mode_id(m: Mode) -> str:
    return f"{m.transfer.value}-hdr{int(m.hdr)}-snorm{int(m.snorm)}-s{m.input_scale:g}"


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
def test_main_input_matches_scalar_formula(mode: Mode, rng) -> None:
    vals = special_values(rng)
    img = vals[: (len(vals) // 3) * 3].reshape(1, -1, 3)
    got = build_input(img, None, None, mode)
    assert got.shape == (3, 1, img.shape[1]) and got.dtype == np.float32
    pre = np.array([scalar_main(v, mode) for v in img.ravel()], np.float32)
    want = forward(mode.transfer, pre).reshape(1, -1, 3).transpose(2, 0, 1)
    assert np.array_equal(got, want, equal_nan=False)
    assert np.isfinite(got).all()


def test_aux_inputs_match_scalar_formula(rng) -> None:
    vals = special_values(rng)
    n = (len(vals) // 3) * 3
    color = np.abs(rng.standard_normal(n)).astype(np.float32).reshape(1, -1, 3)
    albedo = vals[:n].reshape(1, -1, 3)
    normal = vals[::-1][:n].copy().reshape(1, -1, 3)
    mode = mode_for("RT", hdr=True, input_scale=3.0)
    got = build_input(color, albedo, normal, mode)
    assert got.shape == (9, 1, n // 3)

    def alb(v):
        return F(0) if np.isnan(v) else F(min(max(v, F(0)), F(1)))

    def nrm(v):
        v = F(0) if np.isnan(v) else F(min(max(v, F(-1)), F(1)))
        return v * F(0.5) + F(0.5)

    want_alb = np.array([alb(v) for v in albedo.ravel()], np.float32).reshape(1, -1, 3)
    want_nrm = np.array([nrm(v) for v in normal.ravel()], np.float32).reshape(1, -1, 3)
    assert np.array_equal(got[3:6], want_alb.transpose(2, 0, 1))
    assert np.array_equal(got[6:9], want_nrm.transpose(2, 0, 1))
    # aux images are never scaled: only the main input is
    assert np.array_equal(got[0:3], build_input(color, None, None, mode)[0:3])


@pytest.mark.parametrize("mode", MODES, ids=mode_id)
@pytest.mark.parametrize("channels", [1, 2, 3])
def test_output_matches_scalar_formula(mode: Mode, channels: int, rng) -> None:
    vals = special_values(rng)
    n = len(vals) // 3
    y = vals[: 3 * n].reshape(n, 3).T.reshape(3, 1, n).copy()
    got = finish_output(y, mode, channels)
    assert got.shape == (1, n, channels) and got.dtype == np.float32
    want = np.stack([scalar_output(y[:, 0, i], mode, channels) for i in range(n)])[None]
    # NaN only where the formula itself gives inf * 0 (s == 0 with an infinite decode)
    assert np.array_equal(got, want, equal_nan=True)


def test_broadcast_rgb_follows_oidn_channel_rules() -> None:
    a = np.arange(24, dtype=np.float32).reshape(2, 4, 3)
    assert np.array_equal(broadcast_rgb(a), a)
    assert np.array_equal(broadcast_rgb(a[:, :, :2]), a[:, :, (0, 1, 1)])
    assert np.array_equal(broadcast_rgb(a[:, :, :1]), a[:, :, (0, 0, 0)])
    assert np.array_equal(broadcast_rgb(a[:, :, 0]), a[:, :, (0, 0, 0)])
    h = a.astype(np.float16)
    assert broadcast_rgb(h).dtype == np.float32
    with pytest.raises(InvalidArgumentError, match="expected"):
        broadcast_rgb(np.zeros((2, 2, 4), np.float32))
    with pytest.raises(InvalidArgumentError, match="dtype int32"):
        broadcast_rgb(np.zeros((2, 2, 3), np.int32))


def test_output_scale_is_float32_reciprocal_or_zero() -> None:
    assert Mode(Transfer.PU, True, False, 0.0).output_scale == 0.0
    s = 0.37
    m = Mode(Transfer.PU, True, False, s)
    assert m.input_scale == float(F(s))
    assert m.output_scale == float(F(1) / F(s))
    with pytest.raises(InvalidArgumentError, match="input_scale nan"):
        Mode(Transfer.PU, True, False, float("nan"))


def test_mode_for_sets_hdr_and_snorm_like_oidn() -> None:
    m = mode_for("RTLightmap")
    assert (m.transfer, m.hdr, m.snorm) == (Transfer.LOG, True, False)
    m = mode_for("RTLightmap", directional=True)
    assert (m.transfer, m.hdr, m.snorm) == (Transfer.LINEAR, False, True)
    m = mode_for("RT", normal_only=True)
    assert (m.transfer, m.hdr, m.snorm) == (Transfer.LINEAR, False, True)
    m = mode_for("RT")
    assert (m.transfer, m.hdr, m.snorm) == (Transfer.SRGB, False, False)
    with pytest.raises(InvalidArgumentError, match="unknown filter type"):
        mode_for("rt")


def test_zero_input_scale_gives_zero_output(rng) -> None:
    mode = mode_for("RT", hdr=True, input_scale=0.0)
    y = rng.uniform(0, 2, (3, 4, 5)).astype(np.float32)
    assert not finish_output(y, mode, 3).any()


def test_bands_give_the_same_result_as_the_whole_image(rng) -> None:
    color = (rng.exponential(2.0, (37, 23, 3))).astype(np.float32)
    albedo = rng.uniform(0, 1, (37, 23, 2)).astype(np.float32)
    normal = rng.uniform(-1, 1, (37, 23, 3)).astype(np.float16)
    mode = mode_for("RT", hdr=True, input_scale=0.8)
    whole = build_input(color, albedo, normal, mode)
    buf = np.zeros((9, 40, 32), np.float32)
    for r0 in range(0, 37, 10):
        r1 = min(r0 + 10, 37)
        build_input(color[r0:r1], albedo[r0:r1], normal[r0:r1], mode, out=buf[:, r0:r1, :23])
    assert np.array_equal(buf[:, :37, :23], whole)
    assert not buf[:, 37:].any() and not buf[:, :, 23:].any()
    y = whole[:3]
    out = finish_output(y, mode, 3)
    bands = np.concatenate([finish_output(y[:, r0 : r0 + 8], mode, 3) for r0 in range(0, 37, 8)])
    assert np.array_equal(out, bands)


def test_build_input_rejects_mismatched_sizes() -> None:
    mode = mode_for("RT", hdr=True)
    with pytest.raises(InvalidArgumentError, match="albedo image size"):
        build_input(np.zeros((4, 4, 3), np.float32), np.zeros((4, 5, 3), np.float32), None, mode)
    with pytest.raises(InvalidArgumentError, match="out has shape"):
        build_input(
            np.zeros((4, 4, 3), np.float32), None, None, mode, out=np.zeros((6, 4, 4), np.float32)
        )
    with pytest.raises(InvalidArgumentError, match="out_channels is 4"):
        finish_output(np.zeros((3, 4, 4), np.float32), mode, 4)
