"""The host tile runner (`backends.host_runner`): input and output passes run per tile.

Every tile's input processing writes straight into the tile buffer and its output
processing straight into the result, so a denoise holds no whole-image network input
or output. The tests compare it with whole-image passes (the image processed at once,
the tiles stitched into a whole network output, processed at once) around the same
executor: the executor sees the same tile buffers, so the images are equal bit for bit
on any CPU. Memory is measured with tracemalloc (NumPy reports its buffers to it): what
a run allocates grows with the image by the result alone.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from oidn_gpu import Denoiser
from oidn_gpu.backends.base import DenoiseImages
from oidn_gpu.backends.host_runner import HostTileRunner
from oidn_gpu.backends.plan import DenoiseOptions, DenoisePlan, plan_denoise
from oidn_gpu.backends.reference import ReferenceExecutor
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.image import process, tiling
from oidn_gpu.model.unet import load_model
from tests.models import random_model
from tests.unit.test_reference_backend import tiny_unet

TILE_EDGE = 64
OVERLAP = 16
ALIGNMENT = 16


def _executor(input_channels: int) -> ReferenceExecutor:
    graph = tiny_unet(input_channels, 8, 8, 8)
    return ReferenceExecutor(random_model(graph, np.random.default_rng(input_channels)))


def _plan(height: int, width: int, mode: process.Mode) -> DenoisePlan:
    tiles = tiling.plan_tiles_max_edge(
        height, width, max_edge=TILE_EDGE, overlap=OVERLAP, alignment=ALIGNMENT
    )
    return DenoisePlan(mode=mode, tiles=tiles, alignment=ALIGNMENT)


def _whole_image_passes(
    executor: ReferenceExecutor, images: DenoiseImages, plan: DenoisePlan
) -> np.ndarray:
    """The same denoise with the input and output processed for the whole image at once."""
    x = process.build_input(images.main, images.albedo, images.normal, plan.mode)
    tiles = plan.tiles
    y = np.empty((3, tiles.height, tiles.width), np.float32)
    buffer = np.zeros((x.shape[0], tiles.tile_h, tiles.tile_w), np.float32)
    for t in tiles.tiles:
        buffer.fill(0.0)
        buffer[:, t.buf_y : t.buf_y + t.in_h, t.buf_x : t.buf_x + t.in_w] = x[
            :, t.in_y : t.in_y + t.in_h, t.in_x : t.in_x + t.in_w
        ]
        result = executor.run(buffer)
        y[:, t.out_y : t.out_y + t.out_h, t.out_x : t.out_x + t.out_w] = result[
            :, t.src_y : t.src_y + t.out_h, t.src_x : t.src_x + t.out_w
        ]
    return process.finish_output(y, plan.mode, images.out_channels)


def _image(height: int, width: int, channels: int, seed: int, scale: float = 1.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    pixels = rng.random((height, width, channels), dtype=np.float32) * np.float32(scale)
    pixels[rng.random((height, width)) < 0.01] = np.nan  # sanitized by the input pass
    return pixels


CASES = {
    "hdr pu, albedo and normal": (dict(filter_type="RT", hdr=True, input_scale=0.7), 3, 9, 8.0),
    "srgb": (dict(filter_type="RT", srgb=True), 3, 3, 1.0),
    "ldr with albedo": (dict(filter_type="RT"), 3, 6, 1.0),
    "grey": (dict(filter_type="RT", hdr=True), 1, 3, 4.0),
    "normal alone": (dict(filter_type="RT", normal_only=True), 3, 3, 1.0),
    "lightmap log": (dict(filter_type="RTLightmap", hdr=True), 3, 3, 50.0),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tiled_passes_give_the_whole_image_passes_bit_for_bit(case: str) -> None:
    options, channels, inputs, scale = CASES[case]
    mode = process.mode_for(**options)
    main = _image(48, 120, channels, seed=1, scale=scale)
    if options.get("normal_only"):
        main = main * 2 - 1
    albedo = _image(48, 120, 3, seed=2) if inputs >= 6 else None
    normal = _image(48, 120, 3, seed=3) * 2 - 1 if inputs == 9 else None
    images = DenoiseImages(main, albedo, normal, out_channels=channels)
    plan = _plan(48, 120, mode)
    assert len(plan.tiles.tiles) > 2
    executor = _executor(inputs)
    expected = _whole_image_passes(executor, images, plan)
    got = HostTileRunner(executor).run(images, plan)
    assert got.dtype == np.float32 and got.shape == (48, 120, channels)
    np.testing.assert_array_equal(got, expected)


def test_the_result_goes_into_a_scratch_output_unless_it_is_an_input() -> None:
    mode = process.mode_for("RT", hdr=True, input_scale=1.0)
    color = _image(40, 100, 3, seed=4, scale=4.0).astype(np.float16)
    plan = _plan(40, 100, mode)
    runner = HostTileRunner(_executor(3))
    expected = runner.run(DenoiseImages(color.copy()), plan)
    output = np.full((40, 100, 3), -1, np.float16)
    got = runner.run(DenoiseImages(color, output=output, output_is_scratch=True), plan)
    assert got is output
    np.testing.assert_array_equal(output, expected.astype(np.float16))
    callers = np.full((40, 100, 3), -1, np.float16)
    got = runner.run(DenoiseImages(color, output=callers), plan)
    assert got is not callers and (callers == -1).all()  # written by the caller at the end
    in_place = runner.run(DenoiseImages(color, output=color, output_is_scratch=True), plan)
    assert in_place is not color  # later tiles still read the input around their edges
    np.testing.assert_array_equal(in_place, expected)


def test_mismatched_aux_sizes_are_refused_before_any_tile() -> None:
    mode = process.mode_for("RT", hdr=True, input_scale=1.0)
    color = _image(40, 100, 3, seed=5)
    images = DenoiseImages(color, _image(40, 99, 3, seed=6))
    with pytest.raises(InvalidArgumentError, match=r"albedo image size \(40, 99\) differs"):
        HostTileRunner(_executor(6)).run(images, _plan(40, 100, mode))


def _allocated_while_running(width: int) -> int:
    """Peak bytes NumPy allocates during one run on a warm executor (tracemalloc)."""
    mode = process.mode_for("RT", hdr=True, input_scale=1.0)
    images = DenoiseImages(
        _image(32, width, 3, seed=7), _image(32, width, 3, seed=8), _image(32, width, 3, seed=9)
    )
    plan = _plan(32, width, mode)
    runner = HostTileRunner(_executor(9))
    runner.run(images, plan)  # plans and allocates the executor's buffers of the tile size
    tracemalloc.start()
    try:
        runner.run(images, plan)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_grows_with_the_image_by_the_result_alone() -> None:
    narrow, wide = 128, 512
    growth = _allocated_while_running(wide) - _allocated_while_running(narrow)
    result_growth = 32 * (wide - narrow) * 3 * 4  # the float32 [H, W, 3] result
    # Whole-image passes would add the 9-channel network input, the 3-channel network
    # output and their float64 transfer temporaries: more than 10 times the result.
    assert growth <= 1.5 * result_growth, (growth, result_growth)


def test_max_memory_mb_tiles_match_whole_image_passes_through_the_denoiser(
    package_weights_dir,
) -> None:
    """The filter's plan of a zero budget (OIDN's smallest tiles) on the real model."""
    color = _image(16, 1000, 3, seed=10, scale=4.0)
    options = dict(hdr=True, input_scale=1.0, max_memory_mb=0)
    with Denoiser(backend="reference", **options) as den:
        got = den.denoise(color)
        info = den.info()
    assert info is not None and info.weights == "rt_hdr" and info.tiles > 1
    model = load_model(package_weights_dir / "rt_hdr.tza")
    plan = plan_denoise(model, 16, 1000, DenoiseOptions(**options))
    expected = _whole_image_passes(ReferenceExecutor(model), DenoiseImages(color), plan)
    np.testing.assert_array_equal(got, expected)
