"""Autoexposure: bit-exact against Intel OIDN 2.5.1 on every ISA its CPU device runs.

OIDN's CPU device sums luminance with the SIMD code of the ISA it picks on the
host (AVX-512: 16 lanes; AVX2: 8; SSE4: 8 in two 4-wide registers, no FMA), so
the last bits of its scale depend on the host. Two kinds of checks:

* live, on this host's ISA: pyoidn does not expose OIDN's autoexposure value, but
  OIDN's output with ``inputScale`` unset is bit-identical to its output with
  ``inputScale`` set to exactly that value, so our scale is right when both
  outputs are identical; the tests also check that a nearby scale gives a
  different output, i.e. that the comparison can tell scales apart;
* recorded, for every ISA: OIDN's scales on AVX-512 and AVX2 CPUs and on an
  emulated SSE4 CPU (``tests/data/autoexposure/README.md`` says how they were
  found), each compared with our order for that ISA, whatever this host is.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import autoexposure as ae
from oidn_gpu.image.autoexposure import autoexposure

SCENES = ("cornell_diffuse", "cornell_glossy", "dim_indirect", "textured_checker")
DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "autoexposure"
RECORDED_IMAGES = dict(np.load(DATA_DIR / "images.npz"))
RECORDED_IMAGES.update(np.load(DATA_DIR / "sse4_images.npz"))
AVX2_RECORD = json.loads((DATA_DIR / "oidn_avx2.json").read_text())["scales"]
AVX512_RECORD = json.loads((DATA_DIR / "oidn_avx512.json").read_text())["scales"]
SSE4_RECORD = json.loads((DATA_DIR / "oidn_sse4.json").read_text())["scales"]
# The ISA names OIDN prints with OIDN_VERBOSE=2, by our ISA names.
OIDN_ISA_NAMES = {"AVX-512": "avx512", "AVX2": "avx2", "SSE4.1": "sse4"}


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


@pytest.mark.parametrize("isa", sorted(ae.ISAS))
def test_full_hd_is_not_pathologically_slow(isa: str) -> None:
    # Typically 0.2-0.5 s on 2 cores. The bound is a guard against per-pixel Python loops
    # (minutes at this size), generous enough for a loaded machine, not a benchmark.
    img = hdr_noise(np.random.default_rng(9), (1080, 1920, 3))
    start = time.perf_counter()
    autoexposure(img, isa=isa)
    elapsed_s = time.perf_counter() - start
    assert elapsed_s < 30, f"{elapsed_s:.2f} s"


def mismatches(record: dict, isa: str) -> list[tuple[str, float, float]]:
    """(image, ours, OIDN's) for every recorded image where our scale differs."""
    out = []
    for name, entry in record.items():
        if name in RECORDED_IMAGES:  # (the scenes are checked separately)
            ours = autoexposure(RECORDED_IMAGES[name], isa=isa)
            if ours != entry["oidn_scale"]:
                out.append((name, ours, entry["oidn_scale"]))
    return out


RECORDS = {"avx512": AVX512_RECORD, "avx2": AVX2_RECORD, "sse4": SSE4_RECORD}


@pytest.mark.parametrize("isa", sorted(ae.ISAS))
def test_recorded_scales_reject_the_other_isas_orders(isa: str) -> None:
    # Without this, the per-ISA checks below could pass with one order for all ISAs.
    for other in ae.ISAS:
        if other != isa:
            assert mismatches(RECORDS[isa], other), f"{other}'s order fits OIDN on {isa}"


def test_avx512_order_equals_oidn_on_an_avx512_cpu() -> None:
    assert not mismatches(AVX512_RECORD, "avx512")


def test_avx2_order_equals_oidn_on_an_avx2_cpu() -> None:
    assert not mismatches(AVX2_RECORD, "avx2")


def test_sse4_order_equals_oidn_on_an_sse4_cpu() -> None:
    assert not mismatches(SSE4_RECORD, "sse4")


@pytest.mark.parametrize("isa", sorted(ae.ISAS))
def test_bands_of_one_bin_row_give_oidns_scales(isa: str, monkeypatch) -> None:
    """Luminance computed one band of bin rows at a time (the smallest band here) changes
    no bit of the recorded scales."""
    monkeypatch.setattr(ae, "BAND_PX", 1)
    assert not mismatches(RECORDS[isa], isa)


def test_autoexposure_memory_is_one_band_not_the_image(monkeypatch) -> None:
    import tracemalloc

    img = hdr_noise(np.random.default_rng(11), (128, 128, 3))
    monkeypatch.setattr(ae, "BAND_PX", 128 * ae.MAX_BIN_SIZE)  # one bin row per band
    tracemalloc.start()
    try:
        autoexposure(img)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The whole image at once held about 4.5 times the image (sanitized copy, luminance
    # and its float64 fused multiply-adds); one band of 16 rows holds an eighth of that.
    assert peak < img.nbytes, (peak, img.nbytes)


def test_avx2_order_equals_oidn_on_an_avx2_cpu_on_scenes(scenes_dir: Path) -> None:
    for scene in SCENES:
        expected = AVX2_RECORD[f"scene_{scene}"]["oidn_scale"]
        image = read_exr(scenes_dir / scene / "color_4spp.exr")
        assert autoexposure(image, isa="avx2") == expected, scene


@pytest.mark.oracle
def test_host_order_equals_live_oidn_on_the_recorded_images() -> None:
    for image in RECORDED_IMAGES.values():
        assert_oidn_agrees(image, check_sensitivity=False)


@pytest.mark.oracle
def test_host_isa_is_the_one_oidn_reports() -> None:
    """OIDN's CPU device prints the ISA it picked with OIDN_VERBOSE=2; ours must agree."""
    code = "import pyoidn; d = pyoidn.Device(pyoidn.OIDN_DEVICE_TYPE_CPU); d.commit()"
    env = {k: v for k, v in os.environ.items() if k != ae.ISA_ENV}
    env["OIDN_VERBOSE"] = "2"
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    found = re.search(r"^\s*ISA\s*:\s*(\S+)", result.stdout + result.stderr, re.MULTILINE)
    assert found, result.stdout + result.stderr
    assert OIDN_ISA_NAMES[found.group(1)] == ae._detected_isa().name


AVX2_FMA = {"sse4_1", "avx", "avx2", "fma"}


@pytest.mark.parametrize(
    ("flags", "isa"),
    [
        (AVX2_FMA | {"avx512f", "avx512cd", "avx512dq", "avx512bw", "avx512vl"}, "avx512"),
        (AVX2_FMA | {"avx512f", "avx512cd"}, "avx2"),  # Xeon Phi: AVX-512 but not SKX's
        (AVX2_FMA, "avx2"),
        ({"sse4_1", "avx", "avx2"}, "sse4"),  # AVX2 without FMA: ISPC's AVX2 target needs it
        ({"sse4_1", "avx"}, "sse4"),
        ({"sse4_1"}, "sse4"),
    ],
)
def test_isa_follows_the_cpu_features(flags: set[str], isa: str) -> None:
    assert ae._isa_from_flags(frozenset(flags)).name == isa


def test_isa_variable_overrides_the_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    images = [RECORDED_IMAGES["img02_64x64_k2"], RECORDED_IMAGES["img12_64x16_k0"]]
    scales = {isa: tuple(autoexposure(img, isa=isa) for img in images) for isa in ae.ISAS}
    assert len(set(scales.values())) == len(ae.ISAS)  # the images tell the ISAs apart
    for isa in ae.ISAS:
        monkeypatch.setenv(ae.ISA_ENV, isa)
        assert ae.host_isa() == ae.ISAS[isa]
        assert tuple(autoexposure(img) for img in images) == scales[isa]
    img = images[0]
    monkeypatch.setenv(ae.ISA_ENV, "avx10")
    with pytest.raises(InvalidArgumentError, match=r"unknown CPU ISA OIDN_GPU_CPU_ISA='avx10'"):
        autoexposure(img)
    with pytest.raises(InvalidArgumentError, match=r"unknown CPU ISA 'neon'"):
        autoexposure(img, isa="neon")


@pytest.mark.parametrize("isa", sorted(ae.ISAS))
def test_lane_reduction_adds_every_lane_once(isa: str) -> None:
    # powers of two: every partial sum is exact, so any order gives the exact total
    lanes, register_lanes = ae.ISAS[isa].simd_lanes, ae.ISAS[isa].register_lanes
    values = (2.0 ** np.arange(lanes)).astype(np.float32)
    assert ae._reduce_lanes(values, register_lanes) == np.float32(2**lanes - 1)


@pytest.mark.parametrize(
    ("isa", "order"),
    [
        ("avx512", "(((0+1)+(2+3))+((8+9)+(10+11)))+(((4+5)+(6+7))+((12+13)+(14+15)))"),
        ("avx2", "((0+1)+(2+3))+((4+5)+(6+7))"),
        ("sse4", "((0+4)+(1+5))+((2+6)+(3+7))"),
    ],
)
def test_lane_reduction_order(isa: str, order: str) -> None:
    """The addition tree of each target, traced with symbolic lanes."""

    class Lane:
        def __init__(self, text: str) -> None:
            self.text = text

        def __add__(self, other: Lane) -> Lane:
            return Lane(f"({self.text}+{other.text})")

    lanes = np.array([Lane(str(k)) for k in range(ae.ISAS[isa].simd_lanes)], dtype=object)
    total = np.asarray(ae._reduce_lanes(lanes, ae.ISAS[isa].register_lanes)).item()
    assert total.text == f"({order})"
