"""The temporal metric: warping by the canonical motion, disocclusion, instability, PSNR."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oidn_gpu.image import temporal_metric as tm

H, W = 12, 16


def _image(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((H, W, 3), dtype=np.float32)


def _constant_motion(mx: float, my: float) -> np.ndarray:
    return np.broadcast_to(np.float32([mx, my]), (H, W, 2)).copy()


def test_an_integer_shift_is_warped_exactly() -> None:
    previous = _image()
    # The content moved 3 px right and 2 px down: pixel (x, y) was at (x - 3, y - 2).
    warped, valid = tm.warp(previous, _constant_motion(-3.0, -2.0))
    np.testing.assert_array_equal(warped[2:, 3:], previous[:-2, :-3])
    assert valid[2:, 3:].all() and not valid[:2].any() and not valid[:, :3].any()


def test_a_half_pixel_shift_averages_the_two_neighbours() -> None:
    previous = _image(1)
    warped, valid = tm.warp(previous, _constant_motion(0.5, 0.0))
    expected = 0.5 * (previous[:, :-1] + previous[:, 1:])
    np.testing.assert_allclose(warped[:, :-1], expected, rtol=0, atol=1e-6)
    assert valid[:, :-1].all()  # x + 0.5 <= W - 0.5: on screen
    assert valid[:, -1].all()  # the last column's sample lies on the image's edge


def test_non_finite_and_far_off_screen_motion_is_invalid_never_nan() -> None:
    motion = np.zeros((H, W, 2), np.float32)
    motion[0, 0] = np.nan
    motion[1, 1] = np.inf
    motion[2, 2] = (1e9, 0.0)
    warped, valid = tm.warp(_image(), motion)
    assert np.isfinite(warped).all()
    assert not valid[0, 0] and not valid[1, 1] and not valid[2, 2]
    assert valid.sum() == H * W - 3


def test_a_constant_sequence_has_zero_instability() -> None:
    frame = _image(2)
    frames = [frame] * 4
    motions = [np.zeros((H, W, 2), np.float32)] * 4
    assert tm.temporal_instability(frames, frames, motions) == 0.0
    # Any output equal to its reference is perfectly stable, whatever the motion.
    shifting = [np.roll(_image(3), t, axis=1) for t in range(4)]
    moving = [_constant_motion(-1.0, 0.0)] * 4
    assert tm.temporal_instability(shifting, shifting, moving) == 0.0


def test_flicker_the_reference_lacks_is_measured_and_motion_is_followed() -> None:
    rng = np.random.default_rng(4)
    texture = rng.random((H, W + 8, 3), dtype=np.float32) + 0.5
    # The reference pans 1 px a frame; the output adds fresh noise each frame.
    references = [texture[:, 8 - t : 8 - t + W] for t in range(5)]
    motions = [_constant_motion(-1.0, 0.0)] * 5
    noisy = [r + 0.1 * rng.standard_normal(r.shape, dtype=np.float32) for r in references]
    value = tm.temporal_instability(noisy, references, motions)
    # Two independent noise draws of RMS 0.1 differ by RMS 0.1 * sqrt(2).
    expected = 0.1 * math.sqrt(2) / math.sqrt(np.mean(np.square(references[1])))
    assert value == pytest.approx(expected, rel=0.1)
    # The same noise pattern, carried with the content, does not flicker.
    pattern = 0.1 * rng.standard_normal((H, W + 8, 3), dtype=np.float32)
    carried = [r + pattern[:, 8 - t : 8 - t + W] for t, r in enumerate(references)]
    assert tm.temporal_instability(carried, references, motions) < 1e-6
    # Without the motion, the panning reference would look like flicker: it must not count.
    assert tm.temporal_instability(references, references, [np.zeros((H, W, 2))] * 5) == 0.0


def test_disocclusion_by_forward_backward_consistency() -> None:
    # A 4 x 4 square moves 2 px right over a static background between frames t-1 and t.
    backward = np.zeros((H, W, 2), np.float32)
    backward[4:8, 6:10] = (-2.0, 0.0)  # the square now at columns 6..9 was at 4..7
    previous_forward = np.zeros((H, W, 2), np.float32)
    previous_forward[4:8, 4:8] = (2.0, 0.0)
    hidden = tm.disocclusion_mask(backward, previous_forward=previous_forward)
    expected = np.zeros((H, W), bool)
    expected[4:8, 4:6] = True  # background the square covered in frame t-1
    np.testing.assert_array_equal(hidden, expected)


def test_disocclusion_by_depth_without_forward_motion() -> None:
    depth = np.full((H, W), 10.0, np.float32)
    previous_depth = depth.copy()
    previous_depth[4:8, 4:8] = 2.0  # something near covered these pixels in frame t-1
    hidden = tm.disocclusion_mask(
        np.zeros((H, W, 2), np.float32), depth=depth, previous_depth=previous_depth
    )
    expected = np.zeros((H, W), bool)
    expected[4:8, 4:8] = True
    np.testing.assert_array_equal(hidden, expected)


def test_psnr_relative_l2_and_sequence_metrics() -> None:
    reference = np.full((H, W, 3), 2.0, np.float32)
    output = reference + 0.2
    assert tm.relative_l2(output, reference) == pytest.approx(0.1)
    assert tm.psnr(output, reference) == pytest.approx(20.0, abs=1e-5)  # 20 log10(2 / 0.2)
    assert tm.psnr(reference, reference) == math.inf
    mask = np.zeros((H, W), bool)
    mask[0, :4] = True
    outputs = [reference, output, reference]
    metrics = tm.sequence_metrics(
        outputs, [reference] * 3, [np.zeros((H, W, 2), np.float32)] * 3, [None, mask, None]
    )
    assert metrics.disoccluded_pixels == (0, 4, 0)
    assert metrics.disoccluded_psnr_db == pytest.approx(20.0, abs=1e-5)
    assert metrics.relative_l2 == pytest.approx((0.0, 0.1, 0.0))
    assert metrics.instability > 0


def test_bad_arguments_say_what_was_expected() -> None:
    with pytest.raises(ValueError, match=r"motion has shape \(12, 16, 3\); expected \(12, 16, 2\)"):
        tm.warp(_image(), np.zeros((H, W, 3), np.float32))
    with pytest.raises(ValueError, match="at least 2 frames, got 1"):
        tm.temporal_instability([_image()], [_image()], [np.zeros((H, W, 2))])
    with pytest.raises(ValueError, match="got 2 outputs, 1 references and 2 motions"):
        tm.temporal_instability([_image()] * 2, [_image()], [np.zeros((H, W, 2))] * 2)
