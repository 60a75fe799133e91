"""backends.plan: the one denoise plan (mode and tiles) every runner takes."""

from __future__ import annotations

import pytest

from oidn_gpu.backends.plan import DenoiseOptions, model_alignment, plan_denoise
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.graph.plan import plan as plan_graph
from oidn_gpu.image import process, tiling
from oidn_gpu.image.transfer import Transfer
from oidn_gpu.model import unet
from tests.datasets import DATA_DIR

TINY = DATA_DIR / "tiny_base_ic3.tza"


@pytest.fixture(scope="module")
def model() -> unet.ValidatedModel:
    return unet.load_model(TINY)


@pytest.mark.parametrize(
    "options",
    [
        DenoiseOptions(hdr=True, input_scale=0.5),
        DenoiseOptions(srgb=True),
        DenoiseOptions(normal_only=True),
        DenoiseOptions(filter_type="RTLightmap"),
        DenoiseOptions(filter_type="RTLightmap", directional=True, input_scale=2.0),
    ],
)
def test_the_mode_is_oidns_choice(model, options) -> None:
    expected = process.mode_for(
        options.filter_type,
        hdr=options.hdr,
        srgb=options.srgb,
        directional=options.directional,
        normal_only=options.normal_only,
        input_scale=options.input_scale,
    )
    assert plan_denoise(model, 20, 30, options).mode == expected


def test_a_transfer_override_keeps_hdr_and_scale(model) -> None:
    plan = plan_denoise(
        model, 20, 30, DenoiseOptions(hdr=True, transfer=Transfer.LOG, input_scale=3.0)
    )
    assert (plan.mode.transfer, plan.mode.hdr, plan.mode.input_scale) == (Transfer.LOG, True, 3.0)


def test_tiles_follow_oidns_plan_with_the_models_overlap(model) -> None:
    overlap = unet.tile_overlap(model.spec, 16)
    assert model_alignment(model) == 16 and overlap == 96
    big = plan_denoise(model, 2200, 2400, DenoiseOptions())
    assert big.tiles == tiling.plan_tiles(2200, 2400, overlap=overlap, alignment=16)
    assert big.tiles.is_tiled  # OIDN's default cap of 2160^2 px per tile
    whole = plan_denoise(model, 2200, 2400, DenoiseOptions(whole_image=True))
    assert not whole.tiles.is_tiled and whole.tile_shape == (2208, 2400)
    edge = plan_denoise(model, 48, 272, DenoiseOptions(tile_size=240, whole_image=True))
    assert edge.tiles == tiling.plan_tiles_max_edge(48, 272, max_edge=240, overlap=overlap)
    assert (edge.height, edge.width, len(edge.tiles.tiles)) == (48, 272, 2)


def test_a_memory_budget_bounds_the_planned_activation_memory(model) -> None:
    budget_mb = 100  # the whole 1100x2000 image needs about 185 MiB, a 768x768 tile 50 MiB
    plan = plan_denoise(model, 1100, 2000, DenoiseOptions(max_memory_mb=budget_mb))
    assert plan.tiles.is_tiled
    peak = plan_graph(model.graph, plan.tiles.tile_h, plan.tiles.tile_w).peak_bytes
    assert peak <= budget_mb * 1024 * 1024
    default = plan_denoise(model, 1100, 2000, DenoiseOptions(max_memory_mb=-1))
    assert not default.tiles.is_tiled  # negative: OIDN's default cap only


def test_empty_images_and_small_tile_edges_are_refused(model) -> None:
    with pytest.raises(InvalidArgumentError, match="image size 0x5 is empty"):
        plan_denoise(model, 5, 0, DenoiseOptions())
    with pytest.raises(InvalidArgumentError, match="too small for overlap 96"):
        plan_denoise(model, 300, 300, DenoiseOptions(tile_size=64))
