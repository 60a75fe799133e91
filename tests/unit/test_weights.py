"""Tests of model/weights.py: OIDN's weights choice, file lookup, checksums, loading."""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.errors import (
    InvalidArgumentError,
    InvalidOperationError,
    WeightsFormatError,
    WeightsNotFoundError,
)
from oidn_gpu.model import weights
from oidn_gpu.model.tza import write_tza
from oidn_gpu.model.unet import Topology
from oidn_gpu.model.weights import (
    FilterType,
    Quality,
    bundled_weights_dir,
    is_official,
    load_builtin,
    official_sha256,
    parse_quality,
    select_weights,
    user_weights_dir,
    weights_path,
)
from tests.datasets import official_params

DATA_DIR = Path(__file__).resolve().parents[1] / "data"

NO_INPUT = "input image not specified"
HDR_SRGB = "hdr and srgb modes cannot be enabled at the same time"
ALB_HDR = "hdr mode is not supported for albedo filtering"
NRM_MODES = "hdr and srgb modes are not supported for normal filtering"
INVALID = "invalid combination of input features"
UNSUPPORTED = (  # OIDN's message, and why
    "unsupported combination of input features: color and normal without an albedo (the RT "
    "filter uses a normal only together with an albedo); pass the albedo too, or leave the "
    "normal out"
)
DIRECTIONAL = "directional and hdr/srgb modes cannot be enabled at the same time"

# RT filter, section 3.1 of oidn-semantics.md, every combination written out.
# images ('c' color, 'a' albedo, 'n' normal), hdr, srgb, clean_aux ->
#     (high, balanced, fast) weights, or OIDN's error message.
RT_TABLE: dict[tuple[str, int, int, int], tuple[str, str, str] | str] = {
    ("c", 0, 0, 0): ("rt_ldr", "rt_ldr", "rt_ldr_small"),
    ("c", 0, 0, 1): ("rt_ldr", "rt_ldr", "rt_ldr_small"),
    ("c", 0, 1, 0): ("rt_ldr", "rt_ldr", "rt_ldr_small"),
    ("c", 0, 1, 1): ("rt_ldr", "rt_ldr", "rt_ldr_small"),
    ("c", 1, 0, 0): ("rt_hdr", "rt_hdr", "rt_hdr_small"),
    ("c", 1, 0, 1): ("rt_hdr", "rt_hdr", "rt_hdr_small"),
    ("c", 1, 1, 0): HDR_SRGB,
    ("c", 1, 1, 1): HDR_SRGB,
    ("ca", 0, 0, 0): ("rt_ldr_alb", "rt_ldr_alb", "rt_ldr_alb_small"),
    ("ca", 0, 0, 1): ("rt_ldr_alb", "rt_ldr_alb", "rt_ldr_alb_small"),
    ("ca", 0, 1, 0): ("rt_ldr_alb", "rt_ldr_alb", "rt_ldr_alb_small"),
    ("ca", 0, 1, 1): ("rt_ldr_alb", "rt_ldr_alb", "rt_ldr_alb_small"),
    ("ca", 1, 0, 0): ("rt_hdr_alb", "rt_hdr_alb", "rt_hdr_alb_small"),
    ("ca", 1, 0, 1): ("rt_hdr_alb", "rt_hdr_alb", "rt_hdr_alb_small"),
    ("ca", 1, 1, 0): HDR_SRGB,
    ("ca", 1, 1, 1): HDR_SRGB,
    ("can", 0, 0, 0): ("rt_ldr_alb_nrm", "rt_ldr_alb_nrm", "rt_ldr_alb_nrm_small"),
    ("can", 0, 0, 1): ("rt_ldr_calb_cnrm", "rt_ldr_calb_cnrm", "rt_ldr_calb_cnrm_small"),
    ("can", 0, 1, 0): ("rt_ldr_alb_nrm", "rt_ldr_alb_nrm", "rt_ldr_alb_nrm_small"),
    ("can", 0, 1, 1): ("rt_ldr_calb_cnrm", "rt_ldr_calb_cnrm", "rt_ldr_calb_cnrm_small"),
    ("can", 1, 0, 0): ("rt_hdr_alb_nrm", "rt_hdr_alb_nrm", "rt_hdr_alb_nrm_small"),
    ("can", 1, 0, 1): ("rt_hdr_calb_cnrm_large", "rt_hdr_calb_cnrm", "rt_hdr_calb_cnrm_small"),
    ("can", 1, 1, 0): HDR_SRGB,
    ("can", 1, 1, 1): HDR_SRGB,
    ("cn", 0, 0, 0): UNSUPPORTED,
    ("cn", 0, 0, 1): UNSUPPORTED,
    ("cn", 0, 1, 0): UNSUPPORTED,
    ("cn", 0, 1, 1): UNSUPPORTED,
    ("cn", 1, 0, 0): UNSUPPORTED,
    ("cn", 1, 0, 1): UNSUPPORTED,
    ("cn", 1, 1, 0): HDR_SRGB,
    ("cn", 1, 1, 1): HDR_SRGB,
    ("a", 0, 0, 0): ("rt_alb_large", "rt_alb", "rt_alb"),
    ("a", 0, 0, 1): ("rt_alb_large", "rt_alb", "rt_alb"),
    ("a", 0, 1, 0): ("rt_alb_large", "rt_alb", "rt_alb"),
    ("a", 0, 1, 1): ("rt_alb_large", "rt_alb", "rt_alb"),
    ("a", 1, 0, 0): ALB_HDR,
    ("a", 1, 0, 1): ALB_HDR,
    ("a", 1, 1, 0): HDR_SRGB,
    ("a", 1, 1, 1): HDR_SRGB,
    ("an", 0, 0, 0): INVALID,
    ("an", 0, 0, 1): INVALID,
    ("an", 0, 1, 0): INVALID,
    ("an", 0, 1, 1): INVALID,
    ("an", 1, 0, 0): INVALID,
    ("an", 1, 0, 1): INVALID,
    ("an", 1, 1, 0): HDR_SRGB,
    ("an", 1, 1, 1): HDR_SRGB,
    ("n", 0, 0, 0): ("rt_nrm_large", "rt_nrm", "rt_nrm"),
    ("n", 0, 0, 1): ("rt_nrm_large", "rt_nrm", "rt_nrm"),
    ("n", 0, 1, 0): NRM_MODES,
    ("n", 0, 1, 1): NRM_MODES,
    ("n", 1, 0, 0): NRM_MODES,
    ("n", 1, 0, 1): NRM_MODES,
    ("n", 1, 1, 0): HDR_SRGB,
    ("n", 1, 1, 1): HDR_SRGB,
    ("", 0, 0, 0): NO_INPUT,
    ("", 0, 0, 1): NO_INPUT,
    ("", 0, 1, 0): NO_INPUT,
    ("", 0, 1, 1): NO_INPUT,
    ("", 1, 0, 0): NO_INPUT,
    ("", 1, 0, 1): NO_INPUT,
    ("", 1, 1, 0): NO_INPUT,
    ("", 1, 1, 1): NO_INPUT,
}

QUALITIES = (Quality.HIGH, Quality.BALANCED, Quality.FAST)
OIDN_QUALITY_INT = {Quality.HIGH: 6, Quality.BALANCED: 5, Quality.FAST: 4}


def _select_rt(images: str, hdr: int, srgb: int, clean_aux: int, quality: object) -> str:
    return select_weights(
        "RT",
        color="c" in images,
        albedo="a" in images,
        normal="n" in images,
        hdr=bool(hdr),
        srgb=bool(srgb),
        clean_aux=bool(clean_aux),
        quality=quality,  # type: ignore[arg-type]
    )


@pytest.fixture(autouse=True)
def _fresh_cache():
    weights.clear_cache()
    yield
    weights.clear_cache()


# --- selection --------------------------------------------------------------------------------


def test_rt_table_covers_every_combination_of_inputs_and_flags() -> None:
    images = {"", "c", "a", "n", "ca", "cn", "an", "can"}
    flags = {(h, s, c) for h in (0, 1) for s in (0, 1) for c in (0, 1)}
    assert set(RT_TABLE) == {(i, *f) for i in images for f in flags}


@pytest.mark.parametrize("key", sorted(RT_TABLE))
def test_rt_weights_choice_matches_the_table_for_every_quality(
    key: tuple[str, int, int, int],
) -> None:
    expected = RT_TABLE[key]
    for index, quality in enumerate(QUALITIES):
        if isinstance(expected, str):
            with pytest.raises(InvalidOperationError) as err:
                _select_rt(*key, quality)
            assert str(err.value) == expected
        else:
            assert _select_rt(*key, quality) == expected[index]
            assert _select_rt(*key, quality.value) == expected[index]
            assert _select_rt(*key, OIDN_QUALITY_INT[quality]) == expected[index]


def test_default_quality_is_high() -> None:
    flags = {"color": True, "albedo": True, "normal": True, "hdr": True, "clean_aux": True}
    assert select_weights("RT", **flags) == "rt_hdr_calb_cnrm_large"
    assert select_weights("RT", quality="default", **flags) == "rt_hdr_calb_cnrm_large"
    assert select_weights(FilterType.RT, quality=0, **flags) == "rt_hdr_calb_cnrm_large"


# (color, albedo, normal, directional, hdr, srgb) -> weights for every quality, or error.
LIGHTMAP_TABLE: dict[tuple[int, int, int, int, int, int], str] = {
    (1, 0, 0, 0, 0, 0): "rtlightmap_hdr",
    (1, 0, 0, 0, 1, 0): "rtlightmap_hdr",  # hdr is implied when not directional
    (1, 1, 1, 0, 0, 0): "rtlightmap_hdr",  # albedo/normal are ignored, as in OIDN
    (1, 0, 0, 1, 0, 0): "rtlightmap_dir",
    (1, 1, 0, 1, 0, 0): "rtlightmap_dir",
    (1, 0, 0, 0, 0, 1): HDR_SRGB,
    (1, 0, 0, 1, 1, 0): DIRECTIONAL,
    (1, 0, 0, 1, 0, 1): DIRECTIONAL,
    (1, 0, 0, 1, 1, 1): DIRECTIONAL,
    (0, 0, 0, 0, 0, 0): NO_INPUT,
    (0, 1, 1, 1, 0, 0): NO_INPUT,
}


@pytest.mark.parametrize("key", sorted(LIGHTMAP_TABLE))
def test_rtlightmap_weights_choice_matches_the_table(key: tuple[int, ...]) -> None:
    color, albedo, normal, directional, hdr, srgb = (bool(v) for v in key)
    expected = LIGHTMAP_TABLE[key]
    for quality in ("fast", "balanced", "high", "default", 0, 4, 5, 6):
        kwargs = {
            "color": color,
            "albedo": albedo,
            "normal": normal,
            "directional": directional,
            "hdr": hdr,
            "srgb": srgb,
            "quality": quality,
        }
        if expected.startswith("rtlightmap_"):
            assert select_weights("RTLightmap", **kwargs) == expected
        else:
            with pytest.raises(InvalidOperationError) as err:
                select_weights(FilterType.RT_LIGHTMAP, **kwargs)
            assert str(err.value) == expected


def test_directional_is_rejected_for_the_rt_filter() -> None:
    with pytest.raises(InvalidArgumentError, match="directional=True is only valid for"):
        select_weights("RT", color=True, directional=True)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("fast", Quality.FAST),
        ("balanced", Quality.BALANCED),
        ("high", Quality.HIGH),
        ("default", Quality.HIGH),
        ("HIGH", Quality.HIGH),
        (0, Quality.HIGH),
        (4, Quality.FAST),
        (5, Quality.BALANCED),
        (6, Quality.HIGH),
        (Quality.FAST, Quality.FAST),
    ],
)
def test_quality_accepts_names_enums_and_oidn_ints(value: object, expected: Quality) -> None:
    assert parse_quality(value) is expected  # type: ignore[arg-type]


def test_unknown_quality_name_has_the_documented_message() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        select_weights("RT", color=True, quality="ultra")
    assert str(err.value) == (
        "unknown filter quality mode: 'ultra'; expected 'fast', 'balanced' or 'high'"
    )


@pytest.mark.parametrize("value", [1, 3, 7, -1, True, False, 4.0, None])
def test_unknown_quality_values_are_rejected(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match=f"unknown filter quality mode: {value!r};"):
        parse_quality(value)  # type: ignore[arg-type]


def test_unknown_filter_type_is_rejected() -> None:
    with pytest.raises(InvalidArgumentError) as err:
        select_weights("RTX", color=True)
    assert str(err.value) == "unknown filter type: 'RTX'; expected 'RT' or 'RTLightmap'"


# --- selection checked against Intel OIDN 2.5.1 -----------------------------------------------


class _Oracle:
    """Runs OIDN's RT/RTLightmap filter on fixed 16x16 images, optionally with a weights blob."""

    SIZE = 16

    def __init__(self) -> None:
        import pyoidn
        from pyoidn.capi import oidn_ffi

        self.pyoidn = pyoidn
        self.ffi = oidn_ffi
        lib_dir = Path(pyoidn.__file__).parent / "oidn" / "lib"
        self.lib = ctypes.CDLL(str(lib_dir / "libOpenImageDenoise.so"))
        self.lib.oidnSetSharedFilterData.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_size_t,
        ]
        rng = np.random.default_rng(20261129)
        shape = (self.SIZE, self.SIZE, 3)
        self.images = {
            name: rng.random(shape, dtype=np.float32) for name in ("color", "albedo", "normal")
        }
        self.images["normal"] = self.images["normal"] * 2 - 1
        self.device = pyoidn.Device()
        self.device.commit()

    def run(
        self,
        filter_type: str,
        images: list[str],
        flags: dict[str, bool],
        quality: int,
        blob: bytes | None = None,
    ) -> tuple[np.ndarray | None, str | None]:
        pyoidn = self.pyoidn
        output = np.zeros((self.SIZE, self.SIZE, 3), np.float32)
        flt = pyoidn.Filter(self.device, filter_type)
        for name in images:
            flt.set_image(name, self.images[name], pyoidn.OIDN_FORMAT_FLOAT3)
        flt.set_image("output", output, pyoidn.OIDN_FORMAT_FLOAT3)
        for key, value in flags.items():
            flt.set_bool(key, value)
        flt.set_int("quality", quality)
        buffer = None
        if blob is not None:
            buffer = ctypes.create_string_buffer(blob, len(blob))
            handle = int(self.ffi.cast("uintptr_t", flt._filter))
            self.lib.oidnSetSharedFilterData(handle, b"weights", buffer, len(blob))
        self.device.get_error()
        flt.commit()
        error = self.device.get_error()
        if error is None:
            flt.execute()
            error = self.device.get_error()
        flt.release()
        del buffer
        return (None if error else output), error


@pytest.fixture(scope="module")
def oracle() -> _Oracle:
    return _Oracle()


# (row, quality) choices of RT_TABLE that pick a *_large file
LARGE_CHOICES = sum(
    name.endswith("_large") for row in RT_TABLE.values() if isinstance(row, tuple) for name in row
)


def _check_rt_choices(oracle: _Oracle, weights_dir: Path, *, large: bool) -> int:
    """For every table row and quality whose choice is (or is not) a large file, OIDN's own
    choice gives the same output as our choice passed to OIDN as user weights; OIDN's error
    messages equal ours (checked with ``large=False``). Returns the number of choices
    compared."""
    names = {"c": "color", "a": "albedo", "n": "normal"}
    checked = 0
    for (images, hdr, srgb, clean_aux), expected in RT_TABLE.items():
        flags = {"hdr": bool(hdr), "srgb": bool(srgb), "cleanAux": bool(clean_aux)}
        given = [names[c] for c in images]
        for index, quality in enumerate(QUALITIES):
            uses_large = not isinstance(expected, str) and expected[index].endswith("_large")
            if uses_large != large:
                continue
            builtin, error = oracle.run("RT", given, flags, OIDN_QUALITY_INT[quality])
            if isinstance(expected, str):  # ours is OIDN's message, or it and a reason
                assert error is not None, (images, flags, quality)
                assert expected == error or expected.startswith(f"{error}: "), error
                continue
            assert error is None, (images, flags, quality, error)
            chosen = (weights_dir / f"{expected[index]}.tza").read_bytes()
            ours, error = oracle.run("RT", given, flags, OIDN_QUALITY_INT[quality], chosen)
            assert error is None
            np.testing.assert_array_equal(ours, builtin, err_msg=str((images, flags, quality)))
            checked += 1
    return checked


@pytest.mark.oracle
def test_rt_weights_choice_matches_intel_oidn(oracle: _Oracle, package_weights_dir: Path) -> None:
    checked = _check_rt_choices(oracle, package_weights_dir, large=False)
    assert checked == 24 * 3 - LARGE_CHOICES


@pytest.mark.oracle
def test_rt_large_weights_choice_matches_intel_oidn(oracle: _Oracle, weights_dir: Path) -> None:
    checked = _check_rt_choices(oracle, weights_dir, large=True)
    assert checked == LARGE_CHOICES > 0


@pytest.mark.oracle
def test_rtlightmap_weights_choice_matches_intel_oidn(
    oracle: _Oracle, package_weights_dir: Path
) -> None:
    for directional in (False, True):
        name = select_weights("RTLightmap", color=True, directional=directional)
        blob = (package_weights_dir / f"{name}.tza").read_bytes()
        flags = {"directional": directional}
        for quality in (4, 5, 6):
            builtin, error = oracle.run("RTLightmap", ["color"], flags, quality)
            assert error is None
            ours, _ = oracle.run("RTLightmap", ["color"], flags, quality, blob)
            np.testing.assert_array_equal(ours, builtin)


@pytest.mark.oracle
def test_the_oracle_distinguishes_weights(oracle: _Oracle, package_weights_dir: Path) -> None:
    # guards the two tests above: a wrong choice must change the output
    flags = {"hdr": True, "cleanAux": True}
    images = ["color", "albedo", "normal"]
    builtin, _ = oracle.run("RT", images, flags, 6)
    wrong = (package_weights_dir / "rt_hdr_calb_cnrm.tza").read_bytes()
    other, _ = oracle.run("RT", images, flags, 6, wrong)
    assert not np.array_equal(builtin, other)


# --- locating files ---------------------------------------------------------------------------


@pytest.fixture
def no_user_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An empty per-user cache under tmp_path and no $OIDN_GPU_WEIGHTS."""
    monkeypatch.delenv(weights.WEIGHTS_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(weights.sys, "platform", "linux")
    return tmp_path / "cache" / "oidn-gpu" / "weights"


def test_bundled_weights_are_found_in_the_package(no_user_env: Path) -> None:
    path = weights_path("rt_hdr_alb")
    assert path == bundled_weights_dir() / "rt_hdr_alb.tza"
    assert weights_path("rt_hdr_alb.tza") == path
    assert sorted(p.stem for p in bundled_weights_dir().glob("*.tza")) == sorted(official_sha256())
    assert len(official_sha256()) == 23


def test_user_weights_dir_defaults_to_the_per_user_cache(no_user_env: Path) -> None:
    assert user_weights_dir() == no_user_env


def test_user_weights_dir_follows_the_env_var(
    no_user_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(weights.WEIGHTS_ENV_VAR, str(tmp_path / "env"))
    assert user_weights_dir() == tmp_path / "env"


def test_user_weights_dir_on_macos_and_windows(
    no_user_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(weights.sys, "platform", "darwin")
    assert user_weights_dir() == tmp_path / "home" / "Library" / "Caches" / "oidn-gpu" / "weights"
    monkeypatch.setattr(weights.sys, "platform", "win32")
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "local"))
    assert user_weights_dir() == tmp_path / "local" / "oidn-gpu" / "weights"


def _copy_large(target: Path, name: str = "rt_nrm_large") -> Path:
    """A file named like a weights file in ``target`` (lookup reads names, not contents)."""
    target.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(DATA_DIR / "tiny_large_ic6.tza", target / f"{name}.tza"))


def test_large_weights_are_found_through_the_weights_dir_argument(
    no_user_env: Path, tmp_path: Path
) -> None:
    copied = _copy_large(tmp_path / "arg")
    assert weights_path("rt_nrm_large", tmp_path / "arg") == copied
    assert weights_path("rt_nrm_large", str(tmp_path / "arg")) == copied


def test_large_weights_are_found_through_the_env_var(
    no_user_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copied = _copy_large(tmp_path / "env")
    monkeypatch.setenv(weights.WEIGHTS_ENV_VAR, str(tmp_path / "env"))
    assert weights_path("rt_nrm_large") == copied


def test_large_weights_are_found_in_the_per_user_cache(no_user_env: Path) -> None:
    copied = _copy_large(no_user_env)
    assert weights_path("rt_nrm_large") == copied


# Not a file of the package (all 23 official weights are bundled): a user's own weights.
MISSING = "rt_hdr_custom"


def test_weights_dir_argument_overrides_the_env_var(
    no_user_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _copy_large(tmp_path / "env", MISSING)
    monkeypatch.setenv(weights.WEIGHTS_ENV_VAR, str(tmp_path / "env"))
    with pytest.raises(WeightsNotFoundError):
        weights_path(MISSING, tmp_path / "empty")


def test_user_directory_is_searched_before_the_bundled_one(
    no_user_env: Path, tmp_path: Path
) -> None:
    copied = _copy_large(tmp_path / "arg", "rt_hdr")
    assert weights_path("rt_hdr", tmp_path / "arg") == copied


def test_missing_file_message_names_the_file_every_place_and_the_fix(
    no_user_env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(weights.WEIGHTS_ENV_VAR, str(tmp_path / "env"))
    with pytest.raises(WeightsNotFoundError) as err:
        weights_path(MISSING)
    message = str(err.value)
    assert message.startswith(f"weights file '{MISSING}.tza' not found; looked in ")
    assert f"{tmp_path / 'env'} ($OIDN_GPU_WEIGHTS)" in message
    assert f"{bundled_weights_dir()} (bundled with oidn-gpu)" in message
    assert "'oidn-gpu weights fetch'" in message
    assert "weights_dir=" in message
    assert isinstance(err.value, FileNotFoundError)


def test_missing_file_message_names_the_argument_or_the_per_user_folder(
    no_user_env: Path, tmp_path: Path
) -> None:
    with pytest.raises(WeightsNotFoundError, match=r"\(weights_dir argument\)"):
        weights_path(MISSING, tmp_path / "nowhere")
    with pytest.raises(WeightsNotFoundError, match=r"\(per-user weights folder\)"):
        weights_path(MISSING)


@pytest.mark.parametrize("name", ["", "../rt_hdr", "a/b", "a\\b", ".."])
def test_weights_names_must_be_plain_stems(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="invalid weights name"):
        weights_path(name)


# --- checksums and loading --------------------------------------------------------------------


def test_bundled_files_match_their_official_sums(package_weights_dir: Path) -> None:
    sums = official_sha256()
    bundled = sorted(package_weights_dir.glob("*.tza"))
    assert len(bundled) >= 20
    for path in bundled:
        assert hashlib.sha256(path.read_bytes()).hexdigest() == sums[path.stem], path.name


def test_official_sums_match_the_shared_sha256sums_and_the_files(weights_dir: Path) -> None:
    sums = official_sha256()
    listed = {}
    for line in (weights_dir / "SHA256SUMS").read_text().splitlines():
        digest, file_name = line.split()
        listed[file_name.removesuffix(".tza")] = digest
    assert sums == listed
    assert len(sums) == 23
    for name, digest in sums.items():
        assert hashlib.sha256((weights_dir / f"{name}.tza").read_bytes()).hexdigest() == digest


def test_is_official_finds_names_by_checksum() -> None:
    assert is_official(weights.LARGE_WEIGHTS_SHA256["rt_alb_large"]) == "rt_alb_large"
    assert is_official(official_sha256()["rt_hdr"].upper()) == "rt_hdr"
    assert is_official("0" * 64) is None


SELECTABLE = sorted(
    {name for row in RT_TABLE.values() if isinstance(row, tuple) for name in row}
    | {"rtlightmap_hdr", "rtlightmap_dir"}
)


def test_every_official_file_is_selectable() -> None:
    assert sorted(official_sha256()) == SELECTABLE


@pytest.mark.parametrize("name", official_params(SELECTABLE))
def test_every_selectable_weights_file_loads(name: str, official_weights) -> None:
    model = load_builtin(name, official_weights(name).parent)
    assert model.name == name
    assert model.sha256 == official_sha256()[name]
    assert model.topology is (Topology.LARGE if name.endswith("_large") else Topology.BASE)


def test_load_builtin_caches_per_file(no_user_env: Path) -> None:
    first = load_builtin("rt_ldr_small")
    assert load_builtin("rt_ldr_small") is first
    weights.clear_cache()
    assert load_builtin("rt_ldr_small") is not first


def test_load_builtin_reloads_a_replaced_file(no_user_env: Path, tmp_path: Path) -> None:
    path = tmp_path / "custom.tza"
    shutil.copy(DATA_DIR / "tiny_base_ic3.tza", path)
    first = load_builtin("custom", tmp_path)
    assert first.name == "custom" and first.input_channels == 3
    shutil.copy(DATA_DIR / "tiny_base_ic9.tza", path)
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second = load_builtin("custom", tmp_path)
    assert second.input_channels == 9


def test_official_name_with_other_content_fails_the_checksum(
    no_user_env: Path, tmp_path: Path
) -> None:
    blob = (DATA_DIR / "tiny_large_ic6.tza").read_bytes()
    (tmp_path / "rt_alb_large.tza").write_bytes(blob)
    with pytest.raises(WeightsFormatError) as err:
        load_builtin("rt_alb_large", tmp_path)
    message = str(err.value)
    assert hashlib.sha256(blob).hexdigest() in message
    assert weights.LARGE_WEIGHTS_SHA256["rt_alb_large"] in message


def test_unofficial_names_load_without_a_checksum(no_user_env: Path, tmp_path: Path) -> None:
    blob = write_tza({"x": np.zeros(3, np.float16)})
    (tmp_path / "broken.tza").write_bytes(blob)
    with pytest.raises(WeightsFormatError, match="missing tensors"):
        load_builtin("broken", tmp_path)
