"""The public API (filter.py): OIDN's errors, progress and cancellation, reuse, info."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu import (
    CancelledError,
    Denoiser,
    InvalidArgumentError,
    InvalidOperationError,
    WeightsNotFoundError,
)
from tests.compare import assert_equal_up_to_summation_order


def _img(h: int = 16, w: int = 16, c: int = 3, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((h, w, c), dtype=np.float32)


def test_no_input_image_is_oidns_error() -> None:
    with pytest.raises(InvalidOperationError, match=r"^input image not specified$"):
        oidn_gpu.denoise(backend="reference")


@pytest.mark.parametrize(
    ("options", "images", "message"),
    [
        ({"hdr": True, "srgb": True}, ("color",), "hdr and srgb modes cannot be enabled"),
        ({"hdr": True}, ("albedo",), "hdr mode is not supported for albedo filtering"),
        ({"srgb": True}, ("normal",), "hdr and srgb modes are not supported for normal"),
        ({}, ("albedo", "normal"), "invalid combination of input features"),
        ({}, ("color", "normal"), "unsupported combination of input features"),
    ],
)
def test_invalid_combinations_raise_oidns_messages(
    options: dict, images: tuple[str, ...], message: str
) -> None:
    kwargs = {name: _img() for name in images}
    with pytest.raises(InvalidOperationError, match=message):
        oidn_gpu.denoise(**kwargs, **options, backend="reference")


def test_size_mismatch_and_channel_mismatch() -> None:
    with pytest.raises(InvalidOperationError, match=r"^image size mismatch"):
        oidn_gpu.denoise(_img(16, 16), _img(16, 8), backend="reference")
    with pytest.raises(InvalidOperationError, match=r"^input/output image channel count mismatch"):
        oidn_gpu.denoise(_img(), output=np.zeros((16, 16, 1), np.float32), backend="reference")
    with pytest.raises(InvalidOperationError, match=r"^image size mismatch"):
        oidn_gpu.denoise(_img(), output=np.zeros((8, 16, 3), np.float32), backend="reference")


@pytest.mark.parametrize(
    "bad",
    [
        np.zeros((4, 4, 3), np.int32),
        np.zeros((4, 4, 5), np.float32),
        np.zeros(4, np.float32),
        [[0.0]],
    ],
)
def test_unsupported_image_formats(bad: object) -> None:
    with pytest.raises(InvalidOperationError, match=r"^unsupported input image format"):
        oidn_gpu.denoise(bad, backend="reference")


def test_too_large_image_is_rejected_before_allocating() -> None:
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (70000, 1, 3), (0, 0, 0))
    with pytest.raises(InvalidArgumentError, match=r"^image size is too large"):
        oidn_gpu.denoise(huge, backend="reference")


def test_unknown_quality_filter_backend_prefilter() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown filter quality mode: 'ultra'"):
        Denoiser(quality="ultra")
    with pytest.raises(InvalidArgumentError, match="unknown filter type: 'Foo'"):
        Denoiser(filter_type="Foo")
    with pytest.raises(InvalidArgumentError, match="unknown backend 'cpu'"):
        Denoiser(backend="cpu")
    with pytest.raises(InvalidArgumentError, match="unknown prefilter 'slow'"):
        Denoiser(prefilter="slow")


def test_high_quality_modes_work_offline_from_the_package(tmp_path, monkeypatch) -> None:
    # No user weights folder holds anything: the *_large weights come from the package.
    monkeypatch.setenv("OIDN_GPU_WEIGHTS", str(tmp_path))
    color, alb, nrm = _img(), _img(seed=1), _img(seed=2)
    with oidn_gpu.Denoiser(hdr=True, clean_aux=True, backend="reference") as den:
        den.denoise(color, alb, nrm)
        assert den.info().weights == "rt_hdr_calb_cnrm_large"
    with oidn_gpu.Denoiser(hdr=True, prefilter="accurate", backend="reference") as den:
        out = den.denoise(color, alb, nrm)
        assert den.info().weights == "rt_hdr_calb_cnrm_large"
    assert out.shape == color.shape and np.isfinite(out).all()


def test_progress_is_reported_and_cancel_leaves_output_untouched() -> None:
    color = _img(40, 40)
    seen: list[float] = []
    oidn_gpu.denoise(color, backend="reference", progress=lambda f: seen.append(f))
    assert seen[0] == 0.0
    assert seen[-1] == 1.0
    assert seen == sorted(seen)

    output = np.full((40, 40, 3), 7.0, np.float32)
    with pytest.raises(CancelledError):
        oidn_gpu.denoise(color, backend="reference", output=output, progress=lambda f: f < 0.5)
    assert (output == 7.0).all()


def test_cancel_between_tiles() -> None:
    color = _img(32, 480)
    calls: list[float] = []

    def stop_after_first_tile(fraction: float) -> bool:
        calls.append(fraction)
        return fraction == 0.0

    output = np.full((32, 480, 3), -1.0, np.float32)
    with pytest.raises(CancelledError):
        oidn_gpu.denoise(
            color, backend="reference", tile_size=224, output=output, progress=stop_after_first_tile
        )
    assert len(calls) == 2
    assert 0.0 < calls[1] < 1.0
    assert (output == -1.0).all()


def test_tiles_equal_untiled_up_to_summation_order() -> None:
    # Not bit for bit: a pixel sits elsewhere in the BLAS calls of a tile than in those
    # of the whole image, and some BLAS kernels round by position (tests/compare.py).
    color = _img(48, 500, seed=3)
    untiled = oidn_gpu.denoise(color, backend="reference", quality="fast")
    with Denoiser(backend="reference", quality="fast", tile_size=224) as den:
        tiled = den.denoise(color)
        info = den.info()
    assert info is not None and info.tiles > 1
    assert_equal_up_to_summation_order(tiled, untiled, label="tiled vs untiled")


def test_denoiser_reuse_and_info() -> None:
    with Denoiser(hdr=True, backend="reference") as den:
        a = den.denoise(_img(16, 32) * 10)
        b = den.denoise(_img(16, 32) * 10)
        info = den.info()
    np.testing.assert_array_equal(a, b)
    assert info is not None
    assert info.backend == "reference"
    assert info.weights == "rt_hdr"
    assert info.precision == "fp32"
    assert info.input_scale is not None and info.input_scale > 0


def test_zero_size_image_returns_empty() -> None:
    out = oidn_gpu.denoise(np.zeros((0, 5, 3), np.float32), backend="reference")
    assert out.shape == (0, 5, 3)


def test_lightmap_ignores_aux_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="albedo and normal are ignored"):
        oidn_gpu.denoise(_img(), _img(seed=1), filter_type="RTLightmap", backend="reference")


def test_custom_weights_replace_the_builtin_choice() -> None:
    from oidn_gpu.model import weights

    path = weights.weights_path("rt_ldr_small")
    custom = oidn_gpu.denoise(_img(), weights=path, backend="reference")
    builtin = oidn_gpu.denoise(_img(), quality="fast", backend="reference")
    np.testing.assert_array_equal(custom, builtin)
    with pytest.raises(InvalidArgumentError, match="take 3 input channels"):
        oidn_gpu.denoise(_img(), _img(seed=1), weights=path, backend="reference")


def test_prefilter_fast_equals_clean_aux() -> None:
    color, alb, nrm = _img(seed=4), _img(seed=5), _img(seed=6) * 2 - 1
    fast = oidn_gpu.denoise(
        color, alb, nrm, prefilter="fast", quality="balanced", backend="reference"
    )
    clean = oidn_gpu.denoise(
        color, alb, nrm, clean_aux=True, quality="balanced", backend="reference"
    )
    np.testing.assert_array_equal(fast, clean)


def test_prefilter_accurate_denoises_aux_first() -> None:
    color, alb, nrm = _img(seed=4), _img(seed=5), _img(seed=6) * 2 - 1
    clean_alb = oidn_gpu.denoise(albedo=alb, quality="balanced", backend="reference")
    clean_nrm = oidn_gpu.denoise(normal=nrm, quality="balanced", backend="reference")
    expected = oidn_gpu.denoise(
        color, clean_alb, clean_nrm, clean_aux=True, quality="balanced", backend="reference"
    )
    got = oidn_gpu.denoise(
        color, alb, nrm, prefilter="accurate", quality="balanced", backend="reference"
    )
    np.testing.assert_array_equal(got, expected)


# -- options validated at construction ------------------------------------------------------


@pytest.mark.parametrize("name", ["hdr", "srgb", "clean_aux", "directional"])
@pytest.mark.parametrize("value", [1, 0, "yes", None, 1.0])
def test_boolean_options_must_be_bools(name: str, value: object) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"^invalid value for parameter '{name}': "):
        Denoiser(backend="reference", **{name: value})


def test_numpy_bools_are_accepted() -> None:
    assert Denoiser(backend="reference", hdr=np.bool_(True)).hdr is True


@pytest.mark.parametrize("value", [True, 0, -3, 2.5, "64"])
def test_tile_size_must_be_a_positive_int(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid value for parameter 'tile_size'"):
        Denoiser(backend="reference", tile_size=value)


@pytest.mark.parametrize("value", ["x", 1.5, True, [64]])
def test_max_memory_mb_must_be_an_int(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"^invalid value for parameter 'max_memory_mb'"):
        Denoiser(backend="reference", max_memory_mb=value)


def test_max_memory_mb_keeps_oidns_meaning_of_negative_and_zero() -> None:
    color = _img(16, 1000, seed=9)  # wider than the smallest tile OIDN plans (768 px)
    default = oidn_gpu.denoise(color, backend="reference", quality="fast")
    negative = oidn_gpu.denoise(color, backend="reference", quality="fast", max_memory_mb=-1)
    with Denoiser(backend="reference", quality="fast", max_memory_mb=0) as den:
        smallest = den.denoise(color)
        assert den.info().tiles > 1  # a zero budget gives the smallest tiles
    np.testing.assert_array_equal(negative, default)
    # Tiling changes the image by float32 summation order at most (OpenBLAS's AVX2 kernels
    # round a pixel by its column in the gemm call; bit for bit on its AVX-512 kernels).
    assert_equal_up_to_summation_order(smallest, default)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("inf"), "expected a finite number >= 0"),
        (-float("inf"), "expected a finite number >= 0"),
        (-0.5, "expected a finite number >= 0"),
        ("2", "expected a number or None"),
        (True, "expected a number or None"),
    ],
)
def test_input_scale_must_be_finite_and_not_negative(value: object, message: str) -> None:
    pattern = rf"^invalid value for parameter 'input_scale'.*{message}"
    with pytest.raises(InvalidArgumentError, match=pattern):
        Denoiser(backend="reference", hdr=True, input_scale=value)


def test_input_scale_nan_means_auto_and_zero_gives_zero_as_in_oidn() -> None:
    color = _img(16, 32) * 10
    auto = oidn_gpu.denoise(color, hdr=True, backend="reference")
    nan = oidn_gpu.denoise(color, hdr=True, input_scale=float("nan"), backend="reference")
    np.testing.assert_array_equal(nan, auto)
    zero = oidn_gpu.denoise(color, hdr=True, input_scale=np.float32(0), backend="reference")
    assert (zero == 0).all()


@pytest.mark.parametrize(
    "options",
    [
        {"kernel": "bogus"},
        {"kernel": "subgroup"},
        {"gemm": {"rows_per_thread": 4}},
        {"precision": "fp16"},
    ],
)
def test_gpu_options_are_refused_by_the_reference_backend(options: dict) -> None:
    with pytest.raises(InvalidArgumentError, match=r"reference backend"):
        Denoiser(backend="reference", **options)


def test_a_misspelled_option_names_every_valid_one_and_the_closest(monkeypatch) -> None:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    with pytest.raises(InvalidArgumentError) as err:
        oidn_gpu.denoise(_img(), qualty="high")
    message = str(err.value)
    assert message.startswith("unknown option 'qualty' (did you mean 'quality'?): the filter ")
    for name in ("'hdr'", "'quality'", "'clean_aux'", "'max_memory_mb'", "'backend'"):
        assert name in message  # the filter options
    assert message.endswith(
        "the reference backend (chosen by backend='auto') has no option 'qualty' either: "
        "its options are 'precision' or 'threads'"
    )


def test_a_misspelled_option_of_another_backend_names_that_backend() -> None:
    with pytest.raises(
        InvalidArgumentError,
        match=r"^unknown option 'kernal' \(did you mean "
        r"'kernel', an option of the wgpu backend\?\)",
    ):
        Denoiser(backend="reference", kernal="direct")
    with pytest.raises(InvalidArgumentError, match=r"^unknown option 'zzz': the filter"):
        Denoiser(backend="reference", zzz=1)  # nothing close: no guess


def test_normal_without_albedo_says_why() -> None:
    with pytest.raises(
        InvalidOperationError,
        match=r"^unsupported combination of input "
        r"features: color and normal without an albedo .*pass the albedo too",
    ):
        oidn_gpu.denoise(_img(), normal=_img(seed=1), backend="reference")


def test_unknown_precision_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^unknown precision 'fp8'"):
        Denoiser(backend="reference", precision="fp8")


def test_custom_weights_are_checked_at_construction(tmp_path) -> None:
    from oidn_gpu.errors import WeightsFormatError

    missing = tmp_path / "missing.tza"
    with pytest.raises(WeightsNotFoundError, match=r"^weights file not found: '.*missing\.tza'"):
        Denoiser(backend="reference", weights=missing)
    garbage = tmp_path / "garbage.tza"
    garbage.write_bytes(b"not a tza file at all")
    with pytest.raises(WeightsFormatError):
        Denoiser(backend="reference", weights=str(garbage))
    with pytest.raises(WeightsFormatError):
        Denoiser(backend="reference", weights=b"\0" * 64)
    with pytest.raises(InvalidArgumentError, match=r"parameter 'weights': a int"):
        Denoiser(backend="reference", weights=3)
    with pytest.raises(InvalidArgumentError, match=r"parameter 'weights_dir': a int"):
        Denoiser(backend="reference", weights_dir=3)


def test_gpu_options_name_the_auto_choice(monkeypatch) -> None:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    with pytest.raises(InvalidArgumentError, match=r"chosen by backend='auto'"):
        Denoiser(kernel="direct")


def test_wgpu_options_are_checked_at_construction() -> None:
    """No device is opened: the names are checked before any GPU work."""
    with pytest.raises(InvalidArgumentError, match=r"^unknown kernel 'bogus'"):
        Denoiser(backend="wgpu", kernel="bogus")
    with pytest.raises(InvalidArgumentError, match=r"invalid gemm options"):
        Denoiser(backend="wgpu", gemm={"no_such_option": 1})


def test_device_is_checked_at_construction() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^device=object is an option of the wgpu"):
        Denoiser(backend="reference", device=object())
    with pytest.raises(InvalidArgumentError, match=r"^device must be a wgpu.GPUDevice, got str"):
        Denoiser(device="gpu0")  # a device makes "auto" pick wgpu


def test_reentrant_calls_from_a_progress_callback_raise_and_leave_it_usable() -> None:
    color = _img(32, 32, seed=11)
    with Denoiser(backend="reference", quality="fast") as den:
        expected = den.denoise(color)
        for inner in (lambda: den.denoise(color), den.close):
            output = np.full_like(color, -1.0)

            def progress(fraction: float, inner=inner) -> None:
                if fraction == 0.0:
                    inner()

            with pytest.raises(InvalidOperationError, match=r"called from inside a running"):
                den.denoise(color, output=output, progress=progress)
            assert (output == -1.0).all()
        np.testing.assert_array_equal(den.denoise(color), expected)
