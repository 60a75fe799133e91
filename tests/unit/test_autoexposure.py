"""Autoexposure: bit-exact against Intel OIDN 2.5.1 (through the inputScale identity).

pyoidn does not expose OIDN's autoexposure value, but OIDN's output with
``inputScale`` unset (autoexposure) is bit-identical to its output with
``inputScale`` set to exactly that value (semantics section 11). So our scale is
right when both outputs are identical; the tests also check that a nearby scale
gives a different output, i.e. that the comparison can tell scales apart.
"""

from __future__ import annotations

import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import autoexposure as ae
from oidn_gpu.image.autoexposure import autoexposure

SCENES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker")


def read_exr(path: Path) -> np.ndarray:
    import OpenImageIO as oiio  # noqa: N813 - the package's conventional alias

    buf = oiio.ImageBuf(str(path))
    return np.ascontiguousarray(buf.get_pixels(oiio.FLOAT)[:, :, :3])


def hdr_noise(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return (rng.random(shape) ** 3 * 8 * rng.exponential(1, shape)).astype(np.float32)


def assert_oidn_agrees(img: np.ndarray, *, check_sensitivity: bool = True) -> None:
    """OIDN's autoexposure output equals its output with inputScale = our s, not s*(1+1e-6)."""
    from tests.oracle import oidn_denoise

    s = autoexposure(img)
    auto = oidn_denoise(img, hdr=True)
    assert np.array_equal(auto, oidn_denoise(img, hdr=True, input_scale=s)), f"s={s!r}"
    if s == 0.0:  # +inf pixels overflow the sums: OIDN's scale is 0 too (all-zero output)
        assert not auto.any()
        return
    if not check_sensitivity:
        return
    nudged = float(np.float32(s) * np.float32(1 + 1e-6))
    assert not np.array_equal(auto, oidn_denoise(img, hdr=True, input_scale=nudged))


def random_images() -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(20261129)
    cases = []
    for shape in [(64, 64), (45, 70), (250, 129), (1, 1), (15, 17), (14, 69), (45, 7), (200, 33)]:
        cases.append((f"rgb{shape}", hdr_noise(rng, (*shape, 3))))
    img = hdr_noise(rng, (50, 61, 3))
    img[rng.random((50, 61)) < 0.05] = np.nan
    img[rng.random((50, 61)) < 0.02] = np.inf
    img[rng.random((50, 61)) < 0.02] = -3.0
    cases.append(("nan-inf-negative", img))
    img = hdr_noise(rng, (50, 61, 3))
    img[rng.random((50, 61)) < 0.05] = np.nan
    img[rng.random((50, 61)) < 0.05] = -np.inf
    img[rng.random((50, 61)) < 0.02] = -3.0
    cases.append(("nan-negative", img))
    cases.append(("one-channel", hdr_noise(rng, (40, 52, 1))))
    cases.append(("two-channel", hdr_noise(rng, (33, 47, 2))))
    cases.append(("half", hdr_noise(rng, (48, 80, 3)).astype(np.float16)))
    return cases


@pytest.mark.oracle
@pytest.mark.parametrize(("name", "img"), random_images(), ids=[n for n, _ in random_images()])
def test_autoexposure_is_bit_exact_on_synthetic_images(name: str, img: np.ndarray) -> None:
    assert_oidn_agrees(img)


@pytest.mark.oracle
def test_autoexposure_is_bit_exact_on_a_random_size_sweep() -> None:
    """60 random sizes up to 90x90 (many bin widths and partial bins): OIDN's output with
    autoexposure equals its output with inputScale = our s, every time."""
    from tests.oracle import oidn_denoise

    rng = np.random.default_rng(123)
    mismatches = []
    for _ in range(60):
        h, w = (int(v) for v in rng.integers(1, 90, size=2))
        img = hdr_noise(rng, (h, w, 3))
        s = autoexposure(img)
        auto = oidn_denoise(img, hdr=True, quality="fast")
        if not np.array_equal(auto, oidn_denoise(img, hdr=True, quality="fast", input_scale=s)):
            mismatches.append((h, w, s))
    assert not mismatches


@pytest.mark.oracle
@pytest.mark.parametrize("scene", SCENES)
def test_autoexposure_is_bit_exact_on_scenes(scene: str, scenes_dir: Path) -> None:
    img = read_exr(scenes_dir / scene / "color_4spp.exr")
    assert_oidn_agrees(img, check_sensitivity=False)  # the crop shows sensitivity (saves time)
    assert_oidn_agrees(np.ascontiguousarray(img[100:356, 50:306]))


def test_dark_and_empty_images_give_one() -> None:
    assert autoexposure(np.zeros((20, 30, 3), np.float32)) == 1.0
    assert autoexposure(np.full((20, 30, 3), 1e-9, np.float32)) == 1.0
    assert autoexposure(np.full((5, 5), np.nan, np.float32)) == 1.0
    assert autoexposure(np.zeros((0, 7, 3), np.float32)) == 1.0


def test_uniform_image_gives_key_over_luminance() -> None:
    # every bin averages to the same luminance L, so s = 0.18 / L (up to float32 rounding)
    s = autoexposure(np.ones((64, 48, 3), np.float32))
    assert s == pytest.approx(0.18, rel=1e-6)


def test_grey_channel_rules_match_broadcast() -> None:
    rng = np.random.default_rng(3)
    img = hdr_noise(rng, (30, 40, 2))
    assert autoexposure(img) == autoexposure(img[:, :, (0, 1, 1)])
    grey = img[:, :, 0]
    assert autoexposure(grey) == autoexposure(np.repeat(grey[:, :, None], 3, axis=2))


def test_fma_emulation_is_correctly_rounded() -> None:
    rng = np.random.default_rng(5)
    a = rng.standard_normal(3000).astype(np.float32)
    c = (rng.standard_normal(3000) * 1e-3).astype(np.float32)
    b = ae.LUMINANCE_B
    got = ae._fma32(a, b, c)
    for ai, ci, gi in zip(a, c, got, strict=True):
        exact = Fraction(float(ai)) * Fraction(float(b)) + Fraction(float(ci))
        err = abs(Fraction(float(gi)) - exact)
        for nb in (np.nextafter(gi, np.float32(-np.inf)), np.nextafter(gi, np.float32(np.inf))):
            assert err <= abs(Fraction(float(nb)) - exact)


def test_fma_emulation_repairs_double_rounding() -> None:
    # 1 + (2^-24 + 2^-54): the float64 sum rounds to 1 + 2^-24, exactly halfway between
    # the float32 values 1 and 1 + 2^-23, and would then round to even (1); the exact
    # value is above halfway, so a single rounding gives 1 + 2^-23.
    a = np.array([2.0**-24], np.float32)
    b = np.float32(1.0 + 2.0**-23)  # product 2^-24 + 2^-47, exact in float64
    c = np.array([1.0], np.float32)
    assert np.float64(a[0]) * np.float64(b) + 1.0 == 1.0 + 2.0**-24 + 2.0**-47
    got = ae._fma32(a, b, c)
    assert got[0] == np.float32(1.0 + 2.0**-23)
    # the same with a product that is exactly halfway: ties to even gives 1
    got = ae._fma32(a, np.float32(1.0), c)
    assert got[0] == np.float32(1.0)


def test_rejects_bad_images() -> None:
    with pytest.raises(InvalidArgumentError, match=r"shape \(4, 4, 4\)"):
        autoexposure(np.zeros((4, 4, 4), np.float32))
    with pytest.raises(InvalidArgumentError, match="dtype float64"):
        autoexposure(np.zeros((4, 4, 3), np.float64))


def test_full_hd_is_fast() -> None:
    img = hdr_noise(np.random.default_rng(9), (1080, 1920, 3))
    autoexposure(img[:64, :64])  # warm up
    start = time.perf_counter()
    autoexposure(img)
    elapsed_s = time.perf_counter() - start
    assert elapsed_s < 1.5, f"{elapsed_s:.2f} s"  # typically ~0.2 s on 2 cores
