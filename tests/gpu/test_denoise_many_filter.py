"""`Denoiser.denoise_many`: a sequence gives, frame by frame, what `Denoiser.denoise` gives."""

from __future__ import annotations

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends.base import AutoexposureRunner, SequenceRunner
from oidn_gpu.errors import InvalidArgumentError, InvalidOperationError


def _sequence() -> list:
    rng = np.random.default_rng(9)
    frames: list = []
    for index in range(3):
        color = (rng.random((24, 40, 3)) * 10.0 ** (index - 1)).astype(np.float32)
        albedo = rng.random((24, 40, 3)).astype(np.float32)
        frames.append((color, albedo))
    frames.append(
        {"color": rng.random((20, 20, 4)).astype(np.float16), "albedo": frames[0][1][:20, :20]}
    )
    frames.append(frames[0][0])  # color only: another model
    frames.append((frames[1][0], frames[1][1]))
    return frames


@pytest.mark.parametrize("options", [{"hdr": True}, {"hdr": True, "input_scale": 0.5}, {}])
def test_a_sequence_equals_frame_by_frame_calls(options) -> None:
    frames = _sequence()
    with oidn_gpu.Denoiser(backend="wgpu", precision="fp32", quality="fast", **options) as den:
        expected, scales = [], []
        for frame in frames:
            images = (
                frame
                if isinstance(frame, tuple)
                else ((frame["color"], frame["albedo"]) if isinstance(frame, dict) else (frame,))
            )
            expected.append(den.denoise(*images))
            scales.append(den.info().input_scale)
        got = []
        for result in den.denoise_many(frames):
            got.append(result)
            assert den.info().input_scale == scales[len(got) - 1]
    assert len(got) == len(frames)
    for ours, theirs in zip(got, expected, strict=True):
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        assert np.array_equal(ours, theirs)


def test_bad_frames_raise_as_denoise_does() -> None:
    with oidn_gpu.Denoiser(backend="wgpu", precision="fp32", quality="fast") as den:
        with pytest.raises(InvalidArgumentError, match="unknown image name"):
            list(den.denoise_many([{"colour": np.zeros((4, 4, 3), np.float32)}]))
        with pytest.raises(InvalidOperationError, match="dtype int64"):
            list(den.denoise_many([np.zeros((4, 4, 3), np.int64)]))
        assert list(den.denoise_many([])) == []


def test_the_wgpu_runner_autoexposes_and_overlaps_and_the_host_runner_does_neither() -> None:
    color = np.random.default_rng(1).random((16, 16, 3)).astype(np.float32)
    for backend, device_side in (("wgpu", True), ("reference", False)):
        with oidn_gpu.Denoiser(backend=backend, hdr=True, quality="fast") as den:
            den.denoise(color)
            (engine,) = den._engines.values()
            assert isinstance(engine.runner, AutoexposureRunner) is device_side
            assert isinstance(engine.runner, SequenceRunner) is device_side
            expected = den.denoise(color)
            (got,) = list(den.denoise_many([color]))
            assert np.array_equal(got, expected)
