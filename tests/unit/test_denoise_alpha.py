"""`Denoiser.denoise(..., alpha="denoise")`: a colour's alpha denoised beside it.

On the Mitsuba frame of tests/data/aovs (an object over a transparent background, 4 spp)
with the reference backend: the colour is the one ``alpha="copy"`` gives, the alpha the
one `filter_alpha.denoise_alpha` gives with the fast LDR weights and the albedo the colour
was denoised with (prefiltered with ``prefilter="accurate"``), for float and integer
images, a given output and the one-call API; the oidn backend (Intel OIDN 2.5.1) gives
what pyoidn gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends import probe
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError
from oidn_gpu.filter_alpha import alpha_config, denoise_alpha
from oidn_gpu.image.coverage import fit_coverage
from tests.oracle import oidn_denoise
from tests.unit.test_aov_sum import alpha_images


@pytest.fixture(scope="module")
def frame() -> dict[str, np.ndarray]:
    return alpha_images()


def _expected_alpha(alpha: np.ndarray, albedo: np.ndarray) -> np.ndarray:
    config = alpha_config(oidn_gpu.Denoiser(backend="reference").config)
    with oidn_gpu.Denoiser.from_config(config) as den:
        return denoise_alpha(den, alpha, albedo)


def test_the_alpha_is_denoised_and_the_colour_is_as_with_copy(frame) -> None:
    rgba, albedo, normal = frame["rgba"], frame["albedo"], frame["normal"]
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        denoised = den.denoise(rgba, albedo, normal, alpha="denoise")
        copied = den.denoise(rgba, albedo, normal)
    assert denoised.shape == rgba.shape and denoised.dtype == np.float32
    np.testing.assert_array_equal(denoised[:, :, :3], copied[:, :, :3])
    np.testing.assert_array_equal(copied[:, :, 3], rgba[:, :, 3])
    expected = _expected_alpha(rgba[:, :, 3], albedo)
    np.testing.assert_array_equal(denoised[:, :, 3], expected)
    noisy_error = np.sqrt(np.mean((rgba[:, :, 3] - frame["ref"]) ** 2))
    error = np.sqrt(np.mean((denoised[:, :, 3] - frame["ref"]) ** 2))
    assert noisy_error / error >= 3.0  # the bar; 3.66x measured (docs/benchmarks.md)


def test_integer_images_get_the_denoised_alpha_rounded(frame) -> None:
    rgba8 = np.round(np.clip(frame["rgba"], 0, 1) * 255).astype(np.uint8)
    with oidn_gpu.Denoiser(backend="reference") as den:
        denoised = den.denoise(rgba8, frame["albedo"], frame["normal"], alpha="denoise")
    assert denoised.dtype == np.uint8 and denoised.shape == rgba8.shape
    alpha = _expected_alpha(rgba8[:, :, 3] / np.float32(255), frame["albedo"])
    step = np.abs(denoised[:, :, 3].astype(np.int32) - np.round(alpha * 255).astype(np.int32))
    assert step.max() <= 1  # the float result and the encoding's rounding


def test_a_given_output_and_the_one_call_api(frame) -> None:
    rgba, albedo, normal = frame["rgba"], frame["albedo"], frame["normal"]
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        expected = den.denoise(rgba, albedo, normal, alpha="denoise")
        out = np.zeros_like(rgba)
        assert den.denoise(rgba, albedo, normal, output=out, alpha="denoise") is out
    np.testing.assert_array_equal(out, expected)
    once = oidn_gpu.denoise(rgba, albedo, normal, alpha="denoise", backend="reference", hdr=True)
    np.testing.assert_array_equal(once, expected)


@pytest.mark.parametrize("prefilter", ["accurate", "fast"])
def test_with_a_prefilter_the_alpha_takes_the_colour_s_albedo(frame, prefilter) -> None:
    rgba, albedo, normal = frame["rgba"], frame["albedo"], frame["normal"]
    with oidn_gpu.Denoiser(backend="reference", hdr=True, prefilter=prefilter) as den:
        denoised = den.denoise(rgba, albedo, normal, alpha="denoise")
        copied = den.denoise(rgba, albedo, normal)
    np.testing.assert_array_equal(denoised[:, :, :3], copied[:, :, :3])
    guide = albedo
    if prefilter == "accurate":  # the albedo denoised first (rt_alb), as for the colour
        with oidn_gpu.Denoiser(backend="reference") as den:
            guide = den.denoise(albedo=albedo)
        assert not np.array_equal(guide, albedo)
    np.testing.assert_array_equal(denoised[:, :, 3], _expected_alpha(rgba[:, :, 3], guide))


def test_without_alpha_the_option_changes_nothing(frame) -> None:
    rgb = frame["rgba"][:, :, :3]
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        np.testing.assert_array_equal(
            den.denoise(rgb, frame["albedo"], frame["normal"], alpha="denoise"),
            den.denoise(rgb, frame["albedo"], frame["normal"]),
        )
        assert "alpha" not in den._prefilters  # no alpha denoiser was made


def test_a_bad_mode_is_refused_and_close_closes_the_alpha_denoiser(frame) -> None:
    den = oidn_gpu.Denoiser(backend="reference")
    with pytest.raises(InvalidArgumentError, match=r"alpha is 'blur'; expected one of"):
        den.denoise(frame["rgba"], alpha="blur")
    den.denoise(frame["rgba"][:8, :8], alpha="denoise")
    helper = den._alpha_denoiser()
    den.close()
    with pytest.raises(InvalidOperationError):
        helper.denoise(frame["rgba"][:8, :8, :3])


@pytest.mark.skipif(not probe("oidn").available, reason=probe("oidn").note)
def test_the_oidn_backend_gives_pyoidn_s_alpha(frame) -> None:
    rgba, albedo, normal = frame["rgba"], frame["albedo"], frame["normal"]
    with oidn_gpu.Denoiser(backend="oidn", hdr=True) as den:
        denoised = den.denoise(rgba, albedo, normal, alpha="denoise")
    colour = oidn_denoise(np.ascontiguousarray(rgba[:, :, :3]), albedo, normal, hdr=True)
    fitted = np.clip(fit_coverage(np.clip(rgba[:, :, 3], 0, 1), albedo), 0, 1)
    one = np.ascontiguousarray(fitted[:, :, None])
    alpha = oidn_denoise(one, albedo, quality="fast", input_scale=0.75)
    np.testing.assert_array_equal(denoised[:, :, :3], colour)
    np.testing.assert_array_equal(denoised[:, :, 3], np.clip(alpha[:, :, 0], 0, 1))
    # and the reference backend's alpha within float32 arithmetic
    reference = _expected_alpha(rgba[:, :, 3], albedo)
    np.testing.assert_allclose(denoised[:, :, 3], reference, atol=2e-3)
