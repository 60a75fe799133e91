"""Composable AOVs: the sum rule (`oidn_gpu.image.aov_sum.reconcile`), `Denoiser.denoise_aovs`
on Mitsuba light groups whose sum is the beauty, and the alpha channel denoised.

The frames are tests/data/aovs (made by scripts/render_aovs.py): two light groups rendered
separately at 4 spp, the beauty their exact float32 sum, each group's converged reference;
an object over a transparent background with its converged alpha. Reference backend, fp32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.filter_alpha import alpha_config, denoise_alpha
from oidn_gpu.image.aov_sum import reconcile
from oidn_gpu.image.coverage import fit_coverage

DATA = Path(__file__).resolve().parents[1] / "data" / "aovs"
SUM_REL = 1e-5  # the passes' sum against the denoised beauty, relative to its largest value


def read_exr(name: str) -> dict[str, np.ndarray]:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    buf = oiio.ImageBuf(str(DATA / name))
    pixels = buf.get_pixels(oiio.FLOAT)
    return dict(zip(buf.spec().channelnames, np.moveaxis(pixels, 2, 0), strict=True))


def layer(channels: dict[str, np.ndarray], prefix: str, comps: str = "RGB") -> np.ndarray:
    dot = f"{prefix}." if prefix else ""
    return np.ascontiguousarray(np.stack([channels[dot + c] for c in comps], axis=2))


def rel_rmse(actual: np.ndarray, expected: np.ndarray) -> float:
    return float(np.sqrt(np.mean((actual - expected) ** 2) / np.mean(expected**2)))


@pytest.fixture(scope="module")
def groups() -> dict[str, np.ndarray]:
    noisy, ref = read_exr("light_groups.exr"), read_exr("light_groups_ref.exr")
    return {
        "beauty": layer(noisy, ""),
        "key": layer(noisy, "key"),
        "fill": layer(noisy, "fill"),
        "albedo": layer(noisy, "albedo"),
        "normal": layer(noisy, "N", "XYZ"),
        "depth": noisy["depth.Z"],
        "key_ref": layer(ref, "key"),
        "fill_ref": layer(ref, "fill"),
    }


@pytest.fixture(scope="module")
def denoiser() -> oidn_gpu.Denoiser:
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        yield den


# --- the sum rule ------------------------------------------------------------------------


def test_reconciled_passes_sum_to_the_beauty_and_keep_their_shares() -> None:
    rng = np.random.default_rng(1)
    passes = [rng.uniform(0, 5, (8, 9, 3)).astype(np.float32) for _ in range(3)]
    beauty = (sum(passes) * rng.uniform(0.5, 1.5, (8, 9, 3))).astype(np.float32)
    out = reconcile(beauty, passes)
    assert all(p.dtype == np.float32 and p.shape == beauty.shape for p in out)
    total = np.sum([p.astype(np.float64) for p in out], axis=0)
    assert np.abs(total - beauty).max() <= SUM_REL * np.abs(beauty).max()
    # non-negative passes and beauty: a per-pixel rescale, so the shares stay and nothing is < 0
    share = passes[0] / sum(passes)
    np.testing.assert_allclose(out[0] / total, share, rtol=0, atol=1e-5)
    assert min(p.min() for p in out) >= 0


def test_passes_that_are_all_zero_share_the_difference_evenly() -> None:
    beauty = np.full((2, 2, 3), 3.0, np.float32)
    zeros = [np.zeros((2, 2, 3), np.float32) for _ in range(3)]
    for part in reconcile(beauty, zeros):
        np.testing.assert_allclose(part, 1.0, rtol=1e-6)


def test_negative_passes_weigh_by_their_magnitude() -> None:
    positive = np.full((1, 1, 1), 3.0, np.float32)
    negative = np.full((1, 1, 1), -1.0, np.float32)
    beauty = np.full((1, 1, 1), 4.0, np.float32)  # residual 2: 3/4 of it to the larger pass
    out = reconcile(beauty, [positive, negative])
    np.testing.assert_allclose([out[0].item(), out[1].item()], [4.5, -0.5], rtol=1e-5)


def test_the_sum_holds_for_large_and_mixed_values() -> None:
    rng = np.random.default_rng(2)
    passes = [rng.normal(0, 1e4, (16, 16, 3)).astype(np.float32) for _ in range(4)]
    beauty = rng.uniform(1e3, 1e5, (16, 16, 3)).astype(np.float32)
    total = np.sum([p.astype(np.float64) for p in reconcile(beauty, passes)], axis=0)
    assert np.abs(total - beauty).max() <= SUM_REL * np.abs(beauty).max()


def test_reconcile_refuses_other_shapes_and_no_pass() -> None:
    beauty = np.zeros((4, 4, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match=r"pass 1 is \(4, 4, 1\)"):
        reconcile(beauty, [beauty, np.zeros((4, 4, 1), np.float32)])
    with pytest.raises(InvalidArgumentError, match="no pass"):
        reconcile(beauty, [])


# --- Denoiser.denoise_aovs on the light groups -------------------------------------------


def test_the_test_frame_beauty_is_the_exact_sum_of_its_groups(groups) -> None:
    np.testing.assert_array_equal(groups["beauty"], groups["key"] + groups["fill"])


@pytest.fixture(scope="module")
def aov_result(denoiser, groups):
    passes = {"key": groups["key"], "fill": groups["fill"], "depth": groups["depth"]}
    return denoiser.denoise_aovs(
        groups["beauty"], passes, groups["albedo"], groups["normal"], summed=["key", "fill"]
    )


def test_denoised_passes_sum_to_the_denoised_beauty(denoiser, groups, aov_result) -> None:
    beauty = denoiser.denoise(groups["beauty"], groups["albedo"], groups["normal"])
    np.testing.assert_array_equal(aov_result.beauty, beauty)  # the beauty is denoised as usual
    total = aov_result.passes["key"].astype(np.float64) + aov_result.passes["fill"]
    assert np.abs(total - beauty).max() <= SUM_REL * np.abs(beauty).max()


def test_each_pass_stays_as_good_as_denoised_alone(denoiser, groups, aov_result) -> None:
    for name in ("key", "fill"):
        alone = denoiser.denoise(groups[name], groups["albedo"], groups["normal"])
        noisy_error = rel_rmse(groups[name], groups[f"{name}_ref"])
        alone_error = rel_rmse(alone, groups[f"{name}_ref"])
        error = rel_rmse(aov_result.passes[name], groups[f"{name}_ref"])
        assert alone_error < noisy_error  # the frame is one the denoiser helps
        assert error <= 1.05 * alone_error, (name, error, alone_error)


def test_the_sum_is_no_worse_than_the_denoised_beauty(groups, aov_result) -> None:
    reference = groups["key_ref"] + groups["fill_ref"]
    total = aov_result.passes["key"] + aov_result.passes["fill"]
    assert rel_rmse(total, reference) <= rel_rmse(aov_result.beauty, reference) * (1 + 1e-5)


def test_a_pass_outside_the_sum_is_denoised_alone(denoiser, groups, aov_result) -> None:
    depth = denoiser.denoise(groups["depth"], groups["albedo"], groups["normal"])
    assert aov_result.passes["depth"].shape == groups["depth"].shape
    np.testing.assert_array_equal(aov_result.passes["depth"], depth)


def test_without_summed_every_pass_is_in_the_sum(denoiser, groups) -> None:
    passes = {"key": groups["key"], "fill": groups["fill"]}
    result = denoiser.denoise_aovs(groups["beauty"], passes, groups["albedo"], groups["normal"])
    total = result.passes["key"].astype(np.float64) + result.passes["fill"]
    assert np.abs(total - result.beauty).max() <= SUM_REL * np.abs(result.beauty).max()


def test_bad_arguments_are_refused(denoiser, groups) -> None:
    beauty, key = groups["beauty"], groups["key"]
    with pytest.raises(InvalidArgumentError, match=r"'spec'.*not among the passes"):
        denoiser.denoise_aovs(beauty, {"key": key}, summed=["spec"])
    with pytest.raises(InvalidArgumentError, match="alpha is 'blur'"):
        denoiser.denoise_aovs(beauty, {"key": key}, alpha="blur")
    with pytest.raises(InvalidArgumentError, match="pass 'mono' has 1 channels"):
        denoiser.denoise_aovs(beauty, {"key": key, "mono": key[:, :, :1]})
    with pytest.raises(InvalidArgumentError, match="pass 'small' is 8x8 px"):
        denoiser.denoise_aovs(beauty, {"small": key[:8, :8]})
    with pytest.raises(InvalidArgumentError, match="mapping of name to image"):
        denoiser.denoise_aovs(beauty, [key])


# --- alpha ---------------------------------------------------------------------------------


def alpha_images() -> dict[str, np.ndarray]:
    """The alpha test frame: its RGBA colour, albedo, normal and converged alpha."""
    noisy = read_exr("alpha.exr")
    return {
        "rgba": layer(noisy, "", "RGBA"),
        "albedo": layer(noisy, "albedo"),
        "normal": layer(noisy, "N", "XYZ"),
        "ref": read_exr("alpha_ref.exr")["A"],
    }


@pytest.fixture(scope="module")
def alpha_frame() -> dict[str, np.ndarray]:
    return alpha_images()


def test_alpha_denoise_lowers_the_alpha_error(alpha_frame) -> None:
    rgba = alpha_frame["rgba"]
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        result = den.denoise_aovs(
            rgba, {}, alpha_frame["albedo"], alpha_frame["normal"], alpha="denoise"
        )
        copied = den.denoise_aovs(rgba, {}, alpha_frame["albedo"], alpha_frame["normal"])
    np.testing.assert_array_equal(copied.beauty[:, :, 3], rgba[:, :, 3])  # "copy": as OIDN
    alpha = result.beauty[:, :, 3]
    np.testing.assert_array_equal(result.beauty[:, :, :3], copied.beauty[:, :, :3])
    assert alpha.min() >= 0 and alpha.max() <= 1
    noisy_error = np.sqrt(np.mean((rgba[:, :, 3] - alpha_frame["ref"]) ** 2))
    error = np.sqrt(np.mean((alpha - alpha_frame["ref"]) ** 2))
    # measured 1.68x lower on this frame (edge coverage at 4 spp)
    assert error * 1.5 <= noisy_error, (error, noisy_error)


def test_alpha_is_fitted_then_denoised_once_with_the_fast_ldr_weights(alpha_frame) -> None:
    config = alpha_config(oidn_gpu.Denoiser(backend="reference", hdr=True, quality="high").config)
    scale = 0.75  # `filter_alpha.ALPHA_INPUT_SCALE`
    assert (config.filter.hdr, config.filter.quality) == (False, "fast")
    assert config.filter.input_scale == scale
    with oidn_gpu.Denoiser.from_config(config) as den:
        alpha = denoise_alpha(den, alpha_frame["rgba"][:, :, 3:], alpha_frame["albedo"])
        assert "rt_ldr_alb_small" in den.info().weights  # the albedo alone
    # fitted to the albedo's coverage first (tests/unit/test_coverage.py)
    one = np.clip(
        fit_coverage(np.clip(alpha_frame["rgba"][:, :, 3], 0, 1), alpha_frame["albedo"]), 0, 1
    )[:, :, None]
    with oidn_gpu.Denoiser(backend="reference", quality="fast", input_scale=scale) as direct:
        expected = direct.denoise(one, alpha_frame["albedo"])
        rgb = direct.denoise(np.repeat(one, 3, axis=2), alpha_frame["albedo"])
    assert alpha.shape == alpha_frame["rgba"][:, :, 3:].shape
    np.testing.assert_array_equal(alpha, np.clip(expected, 0, 1))
    # a one-channel image is denoised as its RGB replica, the channels' mean written (where
    # the LDR output's clamp to 0..1, before the output scale, leaves them as they were)
    inside = ((rgb > 0) & (rgb < 1 / scale)).all(axis=2) & (rgb.mean(axis=2) < 1)
    assert inside.sum() > 500  # the fractional pixels (the others are clamped to 0 or 1)
    np.testing.assert_allclose(alpha[inside, 0], rgb.mean(axis=2)[inside], atol=1e-6)
