"""The GPU denoise pipeline against NumPy input/output processing + the reference network."""

from __future__ import annotations

import numpy as np
import pytest

from oidn_gpu.backends.wgpu.device import STORAGE_USAGE
from oidn_gpu.backends.wgpu.executor import WgpuExecutor
from oidn_gpu.backends.wgpu.runner import GpuDenoiser, GpuImage, TileRect
from oidn_gpu.errors import CancelledError, InvalidArgumentError
from oidn_gpu.graph.reference import run_graph
from oidn_gpu.image import process, tiling
from oidn_gpu.image.process import Mode
from oidn_gpu.image.transfer import Transfer
from tests.compare import assert_close

# The pipeline's transfer functions use the GPU's pow/log/exp (a few ulp), which the
# inverse transfer amplifies; the network itself is within 1e-5 (test_executor).
PIPELINE_FP32_REL_L2 = 1e-4
H, W = 37, 53  # not multiples of 16: exercises OIDN's bottom/right zero padding
SMALL_OVERLAP = 16  # tiles of 48 px: several tiles on these tiny images


def _images(channels=(3, 3, 3), seed=0):
    rng = np.random.default_rng(seed)
    color = (rng.random((H, W, channels[0]), np.float32) * 3).astype(np.float32)
    color[2, 3, 0] = np.nan
    albedo = rng.random((H, W, channels[1]), np.float32)
    normal = (rng.random((H, W, channels[2]), np.float32) * 2 - 1).astype(np.float32)
    return color, albedo, normal


def _reference(model, plan, images, mode, out_channels):
    """NumPy version of the tiled pipeline (as `filter.Denoiser` runs it)."""
    x = process.build_input(images[0], *[*images[1:], None, None][:2], mode)
    y = np.empty((3, H, W), np.float32)
    for tile in plan.tiles:
        buf = np.zeros((x.shape[0], plan.tile_h, plan.tile_w), np.float32)
        buf[:, tile.buf_y : tile.buf_y + tile.in_h, tile.buf_x : tile.buf_x + tile.in_w] = x[
            :, tile.in_y : tile.in_y + tile.in_h, tile.in_x : tile.in_x + tile.in_w
        ]
        r = run_graph(model.graph, model.convs, buf, dtype=np.float64).astype(np.float32)
        y[:, tile.out_y : tile.out_y + tile.out_h, tile.out_x : tile.out_x + tile.out_w] = r[
            :, tile.src_y : tile.src_y + tile.out_h, tile.src_x : tile.src_x + tile.out_w
        ]
    return process.finish_output(y, mode, out_channels)


def _plans():
    return {
        "untiled": tiling.plan_tiles(H, W, overlap=96, alignment=16),
        "tiled": tiling.plan_tiles_max_edge(H, W, max_edge=48, overlap=SMALL_OVERLAP),
    }


@pytest.fixture(scope="module")
def denoisers(gpu, tiny_models):
    made = {}
    for name in ("tiny_base_ic3", "tiny_base_ic9"):
        executor = WgpuExecutor(tiny_models[name], device=gpu, precision="fp32")
        made[name] = GpuDenoiser(executor)
    yield made
    for denoiser in made.values():
        denoiser.close()
        denoiser.executor.close()
        assert denoiser.executor.resources().is_empty
        assert denoiser.resources() == (0, 0)


CASES = {
    # name: (model, mode, image channels, number of images, out channels)
    "hdr-pu-alb-nrm": ("tiny_base_ic9", Mode(Transfer.PU, True, False, 0.7), (3, 3, 3), 3, 3),
    "hdr-broadcast-aux": ("tiny_base_ic9", Mode(Transfer.PU, True, False, 1.0), (3, 1, 2), 3, 3),
    "ldr-srgb-1ch": ("tiny_base_ic3", Mode(Transfer.SRGB, False, False, 1.0), (1, 3, 3), 1, 1),
    "normal-snorm": ("tiny_base_ic3", Mode(Transfer.LINEAR, False, True, 0.5), (3, 3, 3), 1, 3),
    "lightmap-log": ("tiny_base_ic3", Mode(Transfer.LOG, True, False, 2.0), (2, 3, 3), 1, 2),
}


@pytest.mark.parametrize("plan_name", ["untiled", "tiled"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_pipeline_matches_numpy_processing_and_reference(denoisers, tiny_models, case, plan_name):
    model_name, mode, channels, count, out_channels = CASES[case]
    images = _images(channels)[:count]
    plan = _plans()[plan_name]
    got = denoisers[model_name].denoise(*images, mode=mode, plan=plan, out_channels=out_channels)
    want = _reference(tiny_models[model_name], plan, images, mode, out_channels)
    assert_close(
        got, want, rel_l2_tol=PIPELINE_FP32_REL_L2, label=f"{case}/{plan_name}", check_dtype=False
    )


def test_pipeline_is_deterministic(denoisers):
    mode = CASES["hdr-pu-alb-nrm"][1]
    images = _images()
    plan = _plans()["tiled"]
    first = denoisers["tiny_base_ic9"].denoise(*images, mode=mode, plan=plan)
    assert np.array_equal(first, denoisers["tiny_base_ic9"].denoise(*images, mode=mode, plan=plan))


def test_gpu_buffers_in_rgba_keep_the_color_alpha(gpu, denoisers, tiny_models):
    mode = CASES["hdr-pu-alb-nrm"][1]
    color, albedo, normal = _images()
    rgba = np.concatenate([color, np.full((H, W, 1), 0.25, np.float32)], axis=2)
    plan = _plans()["tiled"]
    buffers = [
        gpu.create_buffer_with_data(n, np.ascontiguousarray(a), STORAGE_USAGE)
        for n, a in (("color", rgba), ("albedo", albedo), ("normal", normal))
    ]
    out_init = np.full((H, W, 4), 0.25, np.float32)  # the caller's alpha
    output = gpu.create_buffer_with_data("output", out_init, STORAGE_USAGE)
    try:
        images = [
            GpuImage(buffers[0], H, W, 3, pixel_stride=4),
            GpuImage(buffers[1], H, W),
            GpuImage(buffers[2], H, W),
        ]
        denoisers["tiny_base_ic9"].denoise_buffers(
            images, GpuImage(output, H, W, 3, pixel_stride=4), mode=mode, plan=plan
        )
        got = np.frombuffer(gpu.read_buffer(output), np.float32).reshape(H, W, 4)
    finally:
        denoisers["tiny_base_ic9"].release_bindings()  # before destroying bound buffers
        for buffer in [*buffers, output]:
            buffer.destroy()
    assert (got[:, :, 3] == 0.25).all()
    want = denoisers["tiny_base_ic9"].denoise(color, albedo, normal, mode=mode, plan=plan)
    assert np.array_equal(got[:, :, :3], want)


def test_repeated_frames_reuse_the_tile_bindings(gpu, denoisers):
    """A second denoise of the same buffers and plan creates no GPU objects (only encodes
    and submits); `release_bindings` frees the cached uniforms once the queue is idle."""
    denoiser = denoisers["tiny_base_ic9"]
    mode = CASES["hdr-pu-alb-nrm"][1]
    plan = _plans()["tiled"]
    arrays = _images()
    buffers = [
        gpu.create_buffer_with_data(f"img{i}", np.ascontiguousarray(a), STORAGE_USAGE)
        for i, a in enumerate(arrays)
    ]
    output = gpu.create_buffer("out", H * W * 12, STORAGE_USAGE)
    images = [GpuImage(b, H, W) for b in buffers]
    try:
        denoiser.denoise_buffers(images, GpuImage(output, H, W), mode=mode, plan=plan)
        first = gpu.read_buffer(output)
        live = denoiser.resources()
        assert live[0] >= 2 * len(plan.tiles)  # two params uniforms per tile
        denoiser.denoise_buffers(images, GpuImage(output, H, W), mode=mode, plan=plan)
        assert gpu.read_buffer(output) == first
        assert denoiser.resources() == live
        denoiser.release_bindings()
        gpu.wait_idle()
        assert denoiser.resources()[0] <= live[0] - 2 * len(plan.tiles)
    finally:
        for buffer in [*buffers, output]:
            buffer.destroy()


def test_interactive_mode_reports_tiles_and_can_be_cancelled(denoisers):
    denoiser = denoisers["tiny_base_ic3"]
    mode = CASES["ldr-srgb-1ch"][1]
    color = _images()[0]
    plan = _plans()["tiled"]
    rects: list[TileRect] = []
    result = denoiser.denoise_interactive(
        color, mode=mode, plan=plan, on_tile=lambda rect, image: rects.append(rect)
    )
    assert [r.index for r in rects] == list(range(len(plan.tiles)))
    assert sum(r.height * r.width for r in rects) == H * W
    assert np.array_equal(result, denoiser.denoise(color, mode=mode, plan=plan))
    calls = []
    with pytest.raises(CancelledError):
        denoiser.denoise_interactive(
            color,
            mode=mode,
            plan=plan,
            on_tile=lambda rect, image: calls.append(rect),
            cancel=lambda: len(calls) >= 1,
        )
    assert len(calls) == 1


def test_interactive_mode_adapts_the_tile_edge_to_a_target_time(denoisers):
    denoiser = denoisers["tiny_base_ic3"]
    mode = CASES["ldr-srgb-1ch"][1]
    plan = _plans()["tiled"]
    denoiser.denoise_interactive(_images()[0], mode=mode, plan=plan, target_tile_ms=1e6)
    assert denoiser.interactive_edge > 48  # far under target: tiles grow
    edge = denoiser.interactive_edge
    denoiser.denoise_interactive(_images()[0], mode=mode, plan=plan, target_tile_ms=1e-3)
    assert denoiser.interactive_edge < edge


def test_interactive_mode_plans_tiles_itself(denoisers):
    denoiser = denoisers["tiny_base_ic3"]
    mode = CASES["ldr-srgb-1ch"][1]
    color = _images()[0]
    got = denoiser.denoise_interactive(color, mode=mode)
    want = denoiser.denoise(color, mode=mode, plan=_plans()["untiled"])
    assert np.array_equal(got, want)  # any tiling of OIDN's overlap gives the same image


def test_frames_in_flight_keep_their_scale_in_the_one_frame_uniform(gpu, denoisers):
    """The scales live in one frame uniform per denoiser, rewritten between frames: two
    frames submitted back to back (no wait) with different scales each get their own."""
    denoiser = denoisers["tiny_base_ic9"]
    plan = _plans()["tiled"]
    images = _images()
    base = CASES["hdr-pu-alb-nrm"][1]
    modes = [process.Mode(base.transfer, True, False, s) for s in (0.7, 3.0, 0.0)]
    buffers = [
        gpu.create_buffer_with_data(f"in{i}", a, STORAGE_USAGE) for i, a in enumerate(images)
    ]
    outputs = [
        gpu.create_buffer(f"out{i}", H * W * 3 * 4, STORAGE_USAGE) for i in range(len(modes))
    ]
    try:
        gpu_images = [GpuImage(b, H, W) for b in buffers]
        frame = None
        for mode, output in zip(modes, outputs, strict=True):
            denoiser.denoise_buffers(gpu_images, GpuImage(output, H, W), mode=mode, plan=plan)
            frame = frame or denoiser.frame_buffer
            assert denoiser.frame_buffer is frame  # one uniform, rewritten per frame
        got = [np.frombuffer(gpu.read_buffer(o), np.float32).reshape(H, W, 3) for o in outputs]
    finally:
        for buffer in [*buffers, *outputs]:
            buffer.destroy()
    for mode, result in zip(modes, got, strict=True):
        want = denoiser.denoise(*images, mode=mode, plan=plan)
        assert np.array_equal(result, want), f"input scale {mode.input_scale}"
    assert not np.array_equal(got[0], got[1])
    assert not got[2].any()  # s == 0: output scale 0


def test_host_output_with_an_alpha_channel_keeps_it(denoisers):
    """The runners' shared destination check: channels past ``out_channels`` stay as they
    are, and the array itself is returned."""
    denoiser = denoisers["tiny_base_ic9"]
    mode = CASES["hdr-pu-alb-nrm"][1]
    images = _images()
    plan = _plans()["tiled"]
    expected = denoiser.denoise(*images, mode=mode, plan=plan)
    rgba = np.full((H, W, 4), 0.25, np.float32)
    assert denoiser.denoise(*images, mode=mode, plan=plan, output=rgba) is rgba
    assert np.array_equal(rgba[:, :, :3], expected) and (rgba[:, :, 3] == 0.25).all()
    with pytest.raises(InvalidArgumentError, match="out_channels is 4; expected 1, 2 or 3"):
        denoiser.denoise(*images, mode=mode, plan=plan, out_channels=4)
    with pytest.raises(InvalidArgumentError, match="image size 36x53 differs"):
        denoiser.denoise(images[0], images[1][1:], images[2], mode=mode, plan=plan)
