"""`GpuDenoiser.denoise_many`: a sequence with the next frame's upload overlapping the current
denoise gives, frame by frame, the images and scales of separate `denoise` calls."""

from __future__ import annotations

import numpy as np

from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.runner import GpuDenoiser
from oidn_gpu.image import autoexposure, tiling
from oidn_gpu.image.process import Mode
from oidn_gpu.image.transfer import Transfer
from tests.autoexposure_tolerance import autoexposure_tolerance

H, W = 37, 53


def _frames(count: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2)
    frames = []
    for index in range(count):
        scale = np.float32(10.0 ** (index - 1))  # each frame its own exposure
        color = (rng.random((H, W, 3), np.float32) * scale).astype(np.float32)
        albedo = rng.random((H, W, 3), np.float32)
        normal = (rng.random((H, W, 3), np.float32) * 2 - 1).astype(np.float32)
        frames.append((color, albedo, normal.astype(np.float16)))
    return frames


def test_a_sequence_gives_the_frames_of_separate_calls(gpu, tiny_models) -> None:
    executor = WgpuExecutor(tiny_models["tiny_base_ic9"], device=gpu, precision="fp32")
    mode = Mode(Transfer.PU, True, False, 1.0)
    plans = [
        tiling.plan_tiles(H, W, overlap=96, alignment=16),
        tiling.plan_tiles_max_edge(H, W, max_edge=48, overlap=16),
    ]
    frames = _frames(4)
    with GpuDenoiser(executor) as denoiser:
        for plan in plans:
            expected, scales = [], []
            for frame in frames:
                expected.append(denoiser.denoise(*frame, mode=mode, plan=plan, autoexposure=True))
                scales.append(denoiser.last_input_scale)
            got = []
            for result in denoiser.denoise_many(frames, mode=mode, plan=plan, autoexposure=True):
                got.append(result)
                host = autoexposure.autoexposure(frames[len(got) - 1][0])
                assert denoiser.last_input_scale == scales[len(got) - 1]
                assert abs(denoiser.last_input_scale - host) <= autoexposure_tolerance(host) * host
            assert len(got) == len(frames)
            for ours, theirs in zip(got, expected, strict=True):
                assert np.array_equal(ours, theirs)
            assert len({float(s) for s in scales}) == len(frames)
            # a fixed scale through the same buffers
            fixed = Mode(Transfer.PU, True, False, 0.25)
            many = list(denoiser.denoise_many(frames[:2], mode=fixed, plan=plan))
            assert denoiser.last_input_scale == 0.25
            single = denoiser.denoise(*frames[1], mode=fixed, plan=plan)
            assert np.array_equal(many[1], single)
    executor.close()


def test_an_empty_sequence_yields_nothing(gpu, tiny_models) -> None:
    executor = WgpuExecutor(tiny_models["tiny_base_ic3"], device=gpu, precision="fp32")
    with GpuDenoiser(executor) as denoiser:
        plan = tiling.plan_tiles(H, W, overlap=96, alignment=16)
        mode = Mode(Transfer.LINEAR, False, False)
        assert list(denoiser.denoise_many([], mode=mode, plan=plan)) == []
    executor.close()
