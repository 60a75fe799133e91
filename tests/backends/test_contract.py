"""The backend contract: every registered backend gives OIDN's image through `Denoiser`.

Each test runs once per entry of `CONTRACT` (one entry per registered backend:
its options and its tolerance against Intel OIDN 2.5.1), so a new backend is
tested by adding one entry; a backend that the tests register
(`conftest.TEST_BACKENDS`) brings its entry as ``CONTRACT_ENTRY`` beside its
`Backend`. Images are small (at most 64 px, the tiled case a 48x272 strip with the
tiny test model); the wgpu entry runs on the session's device (lavapipe in CI) in
fp32. The cuda entry runs on an NVIDIA GPU where torch sees one, else through
Triton's CPU interpreter (``TRITON_INTERPRET=1``, set by tests/conftest.py) on a
16-row strip, so every backend is held to the contract in CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import oidn_gpu
from oidn_gpu.backends import (
    Availability,
    BackendOptions,
    DenoiseImages,
    TileLimits,
    TileRunner,
    backend_names,
    get_backend,
    make_options,
    probe,
    tile_limits,
)
from oidn_gpu.backends.base import Precision, precision_choices
from oidn_gpu.backends.benchmark import benchmark_names, load_benchmark
from oidn_gpu.backends.plan import DenoiseOptions, plan_denoise
from oidn_gpu.errors import (
    CancelledError,
    InvalidArgumentError,
    InvalidOperationError,
)
from oidn_gpu.model import weights as builtin
from oidn_gpu.model.unet import load_model
from tests.backends.conftest import TEST_BACKENDS
from tests.compare import SUMMATION_ORDER_REL_L2, assert_close
from tests.conftest import has_cuda
from tests.oracle import oidn_denoise

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_COLOR = DATA / "tiny_base_ic3.tza"
# OIDN's CPU device folds HDR +Inf into FLT_MAX before the PU transfer; its inverse then
# amplifies float rounding near that pixel (the one documented exception of the fp32 1e-5).
INF_REL_L2 = 5e-5


def _gpu_device(request: pytest.FixtureRequest) -> dict[str, Any]:
    return {"device": request.getfixturevalue("gpu").device}


@dataclass(frozen=True)
class Entry:
    """How one backend is held to the contract.

    Attributes:
        options: the backend's options for these tests (fp32 where it has a choice).
        rel_l2: relative L2 tolerance against Intel OIDN (fp32: float rounding only).
        tiled_exact: tiled output equals untiled output bit for bit; else they agree within
            ``tiled_rel_l2`` (a tile's pixels may be summed in another order).
        tiled_rel_l2: relative L2 of tiled against untiled output when not exact.
        progress_per_tile: ``progress`` hears every finished tile (else only the frame).
        inf_rel_l2: tolerance against OIDN for an HDR image with +Inf pixels.
        fixtures: builds further options from pytest fixtures (a shared device).
        marks: pytest marks of its cases (``gpu`` runs on lavapipe in CI).
        tiled_rows: rows of the two-tile strip (a slow backend runs a shorter one).
        own_tiles: the backend lets Intel OIDN plan its tiles (by ``max_memory_mb``):
            ``tile_size`` is ignored with a warning, and the tiled case is a strip OIDN
            tiles with ``max_memory_mb=0`` (`OWN_TILES_STRIP`).
        progress_steps: ``progress`` hears the backend's own steps (Intel OIDN's every
            operation), more than one call per tile, from 0 to 1.
    """

    options: dict[str, Any] = field(default_factory=dict)
    rel_l2: float = 1e-5
    tiled_exact: bool = True
    tiled_rel_l2: float = SUMMATION_ORDER_REL_L2
    progress_per_tile: bool = True
    inf_rel_l2: float = INF_REL_L2
    fixtures: Callable[[pytest.FixtureRequest], dict[str, Any]] | None = None
    marks: tuple[Any, ...] = ()
    tiled_rows: int = 48
    own_tiles: bool = False
    progress_steps: bool = False


CONTRACT: dict[str, Entry] = {
    # OpenBLAS's AVX2 sgemm kernels round a pixel by its column position in the call, so
    # a tile's pixels may differ from the untiled run by float32 summation order
    # (tests/compare.py).
    "reference": Entry(tiled_exact=False),
    "wgpu": Entry(
        options={"precision": "fp32"},
        fixtures=_gpu_device,
        marks=(pytest.mark.gpu,),
    ),
    # fp16 activations: OIDN's own CUDA device is 3.2e-3 to 4.2e-3 from its CPU output on
    # the shared scenes; tiles of another shape may run other tuned K blocks, which round
    # fp16 partial sums differently; the inverse PU amplifies fp16 rounding near +Inf
    # pixels as it does fp32's (1.1e-2 measured through Triton's interpreter). One CUDA
    # graph per frame: progress hears the frame. Without a GPU the same kernels run
    # through Triton's interpreter (about 15 s per 16x272 frame on one CPU core).
    "cuda": Entry(
        options={"precision": "fp16"},
        rel_l2=5e-3,
        inf_rel_l2=2e-2,
        tiled_exact=False,
        tiled_rel_l2=2e-3,
        progress_per_tile=False,
        marks=(pytest.mark.cuda_device,) if has_cuda() else (),
        tiled_rows=48 if has_cuda() else 16,
    ),
    # Intel OIDN itself on its CPU device (CI): the image of a direct pyoidn call, bit for
    # bit (tolerance 0); OIDN tiles by max_memory_mb and reports its own progress steps.
    "oidn": Entry(
        options={"device": "cpu"},
        rel_l2=0.0,
        inf_rel_l2=0.0,
        own_tiles=True,
        progress_steps=True,
    ),
}
# The strip OIDN cuts into tiles with max_memory_mb=0 (`Entry.own_tiles`): at most 2160 px
# a side untiled, and past OIDN's smallest tile.
OWN_TILES_STRIP = (16, 2400)


def _test_entry(target: str) -> Entry:
    """The `Entry` of a backend the tests register: its module's ``CONTRACT_ENTRY``."""
    module = importlib.import_module(target.partition(":")[0])
    return Entry(**getattr(module, "CONTRACT_ENTRY", {}))


CONTRACT.update({name: _test_entry(target) for name, target in TEST_BACKENDS.items()})


@dataclass(frozen=True)
class _OtherOptions(BackendOptions):
    """Options of no registered backend."""


def _params() -> list[Any]:
    return [pytest.param(name, marks=CONTRACT[name].marks, id=name) for name in CONTRACT]


@pytest.fixture(params=_params())
def backend(request: pytest.FixtureRequest) -> tuple[str, dict[str, Any], Entry]:
    """``(name, options, entry)`` of one contract backend."""
    name = request.param
    entry = CONTRACT[name]
    options = dict(entry.options)
    if entry.fixtures is not None:
        options.update(entry.fixtures(request))
    return name, options, entry


def _denoise(backend: tuple[str, dict[str, Any], Entry], *images: Any, **kwargs: Any):
    name, options, _ = backend
    with oidn_gpu.Denoiser(backend=name, **options, **kwargs) as den:
        out = den.denoise(*images)
        info = den.info()
    assert info is not None and info.backend == name
    return out


def _hdr(rng: np.random.Generator, h: int, w: int, c: int = 3) -> np.ndarray:
    return (rng.random((h, w, c), np.float32) ** 3 * 8).astype(np.float32)


def _aux(rng: np.random.Generator, h: int, w: int) -> tuple[np.ndarray, np.ndarray]:
    albedo = rng.random((h, w, 3), np.float32)
    normal = (rng.random((h, w, 3), np.float32) * 2 - 1).astype(np.float32)
    return albedo, normal


# --- the registry -----------------------------------------------------------------------------


def test_every_registered_backend_has_a_contract_entry() -> None:
    assert set(backend_names()) == set(CONTRACT)


@pytest.mark.parametrize("name", list(CONTRACT))
def test_backend_declares_what_the_registry_needs(name: str) -> None:
    backend = get_backend(name)
    assert backend.name == name
    assert isinstance(backend.priority, int) and backend.description
    assert issubclass(backend.Options, BackendOptions)
    assert dataclasses.is_dataclass(backend.Options)
    defaults = backend.Options()
    with pytest.raises(dataclasses.FrozenInstanceError):
        defaults.extra = 1  # type: ignore[attr-defined]
    availability = probe(name)
    assert isinstance(availability, Availability) and availability.note
    assert probe(name) is availability  # probed once per process
    assert isinstance(tile_limits(name), TileLimits)  # its own, or no bound
    for option, help_text in backend.Options.option_help.items():
        assert option in backend.Options.option_names() and help_text
    assert all(isinstance(p, Precision) and p is not Precision.AUTO for p in backend.precisions)
    if "precision" in backend.Options.option_names():
        choices = backend.Options.option_choices["precision"]
        assert choices == precision_choices(backend.precisions)
        assert backend.Options(precision=choices[-1]).precision == choices[-1]
    assert isinstance(backend.uses_gpu, bool)
    if not backend.uses_gpu:  # placing a CPU backend on a GPU leaves its options as they are
        assert backend.place_on_gpu(defaults, 0) == (defaults, "")


# Every backend of the contract that declares a benchmark (the declaration is optional).
BENCHMARKED = [name for name in CONTRACT if name in benchmark_names()]


@pytest.mark.parametrize("name", BENCHMARKED)
def test_a_declared_benchmark_adds_its_flags_without_running(name: str) -> None:
    benchmark = load_benchmark(name)
    assert benchmark.description and isinstance(benchmark.default, bool)
    parser = argparse.ArgumentParser()
    benchmark.add_arguments(parser)
    assert parser.parse_args([]) is not None


@pytest.mark.parametrize("name", list(CONTRACT))
def test_unknown_and_invalid_options_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=f"the {name} backend has no option 'warp'"):
        make_options(name, warp=2)
    with pytest.raises(
        InvalidArgumentError,
        match=f"^unknown option 'warp': the filter options are .*'quality'.*; the {name} "
        "backend has no option 'warp' either: its options are ",
    ):
        oidn_gpu.Denoiser(backend=name, warp=2)
    with pytest.raises(InvalidArgumentError, match="fit the"):
        make_options(name, _OtherOptions())
    if "precision" in get_backend(name).Options.option_names():
        with pytest.raises(InvalidArgumentError, match="precision 'fp8'"):
            oidn_gpu.Denoiser(backend=name, precision="fp8")


@pytest.mark.parametrize("name", list(CONTRACT))
def test_options_of_another_backend_are_refused_even_when_auto_picked(name, monkeypatch) -> None:
    monkeypatch.setenv("OIDN_GPU_BACKEND", name)
    own = set(get_backend(name).Options.option_names())
    for other in CONTRACT:
        for f in dataclasses.fields(get_backend(other).Options):
            if f.name in own or get_backend(other).Options.selected_by({f.name: "x"}):
                continue
            value = "x" if f.default is None else None
            if value is None:
                continue  # left at its default, another backend's option is ignored
            with pytest.raises(InvalidArgumentError, match=r"chosen by backend='auto'"):
                make_options(name, requested="auto", **{f.name: value})
            assert make_options(name, **{f.name: f.default}) == get_backend(name).Options()


# --- images against Intel OIDN ----------------------------------------------------------------

MODES = {
    "hdr color+albedo+normal": ({"hdr": True}, ("color", "albedo", "normal")),
    "ldr color+albedo": ({}, ("color", "albedo")),
    "srgb color": ({"srgb": True}, ("color",)),
    "clean aux hdr": ({"hdr": True, "clean_aux": True}, ("color", "albedo", "normal")),
    "albedo only": ({}, ("albedo",)),
    "normal only": ({}, ("normal",)),
    "lightmap hdr": ({"filter_type": "RTLightmap"}, ("color",)),
    "lightmap directional": ({"filter_type": "RTLightmap", "directional": True}, ("color",)),
}


@pytest.mark.oracle
@pytest.mark.parametrize("mode", list(MODES))
def test_every_mode_matches_oidn_at_an_odd_size(backend, mode, rng) -> None:
    flags, names = MODES[mode]
    h, w = 37, 23  # odd: padded to 48x32 inside, cropped back
    albedo, normal = _aux(rng, h, w)
    if flags.get("directional"):
        color = (rng.random((h, w, 3), np.float32) * 2 - 1).astype(np.float32)
    elif flags.get("hdr") or flags.get("filter_type"):
        color = _hdr(rng, h, w)
    else:
        color = rng.random((h, w, 3), np.float32)
    given = {"color": color, "albedo": albedo, "normal": normal}
    images = {n: given[n] for n in names}
    quality = "balanced" if flags.get("filter_type") or mode.endswith("only") else "fast"
    ours = _denoise(
        backend, *(images.get(n) for n in ("color", "albedo", "normal")), quality=quality, **flags
    )
    expected = oidn_denoise(
        **{n: images.get(n) for n in ("color", "albedo", "normal")}, quality=quality, **flags
    )
    assert_close(ours, expected, rel_l2_tol=backend[2].rel_l2, label=f"{backend[0]} {mode}")


@pytest.mark.oracle
@pytest.mark.parametrize("channels", [1, 2])
def test_one_and_two_channel_images_broadcast_as_oidn(backend, channels, rng) -> None:
    color = rng.random((24, 40, channels), np.float32)
    if channels == 1:
        color = color[:, :, 0]
    ours = _denoise(backend, color, quality="fast")
    expected = oidn_denoise(color, quality="fast")
    assert ours.shape == color.shape  # an HxW image gives an HxW result
    assert_close(ours, expected, rel_l2_tol=backend[2].rel_l2, label=f"{channels} channel(s)")


@pytest.mark.oracle
def test_nan_and_inf_are_sanitized_as_oidn(backend, rng) -> None:
    color = _hdr(rng, 32, 48)
    color[3, 5] = np.nan
    color[10, 7, 1] = np.inf
    color[20, 30] = -np.inf
    ours = _denoise(backend, color, hdr=True, quality="fast", input_scale=0.5)
    expected = oidn_denoise(color, hdr=True, quality="fast", input_scale=0.5)
    assert np.isfinite(ours).all()
    assert_close(ours, expected, rel_l2_tol=backend[2].inf_rel_l2, label="nan/+inf/-inf")
    finite_top = color.copy()
    finite_top[10, 7, 1] = 1.0  # NaN and -Inf only: sanitized to 0, nothing amplified
    ours = _denoise(backend, finite_top, hdr=True, quality="fast", input_scale=0.5)
    expected = oidn_denoise(finite_top, hdr=True, quality="fast", input_scale=0.5)
    assert_close(ours, expected, rel_l2_tol=backend[2].rel_l2, label="nan/-inf")


@pytest.mark.oracle
def test_tiles_equal_the_untiled_image_and_oidn(backend, rng) -> None:
    if backend[2].own_tiles:
        _own_tiles_equal_the_untiled_image_and_oidn(backend, rng)
        return
    rows = backend[2].tiled_rows
    color = rng.random((rows, 272, 3), np.float32)
    blob = TINY_COLOR.read_bytes()
    untiled = _denoise(backend, color, weights=blob)
    tiled = _denoise(backend, color, weights=blob, tile_size=240)
    plan = plan_denoise(load_model(blob), rows, 272, DenoiseOptions(tile_size=240))
    assert len(plan.tiles.tiles) == 2
    if backend[2].tiled_exact:
        np.testing.assert_array_equal(tiled, untiled)
    else:
        assert_close(tiled, untiled, rel_l2_tol=backend[2].tiled_rel_l2, label="tiled vs untiled")
    assert_close(
        tiled,
        oidn_denoise(color, weights=blob),
        rel_l2_tol=backend[2].rel_l2,
        label="tiled vs oidn",
    )


def _own_tiles_equal_the_untiled_image_and_oidn(backend, rng) -> None:
    """`Entry.own_tiles`: OIDN's tiles (more progress steps) give the untiled image."""
    color = rng.random((*OWN_TILES_STRIP, 3), np.float32)
    blob = TINY_COLOR.read_bytes()
    name, options, entry = backend
    steps: dict[Any, list[float]] = {None: [], 0: []}
    results = {}
    for memory, seen in steps.items():
        with oidn_gpu.Denoiser(backend=name, weights=blob, max_memory_mb=memory, **options) as den:
            results[memory] = den.denoise(color, progress=seen.append)
    assert len(steps[0]) > len(steps[None])  # OIDN ran more tiles, so more steps
    np.testing.assert_array_equal(results[0], results[None])
    expected = oidn_denoise(color, weights=blob, max_memory_mb=0)
    assert_close(results[0], expected, rel_l2_tol=entry.rel_l2, label="tiled vs oidn")
    with pytest.warns(UserWarning, match="tile_size=240 is ignored"):
        ignored = _denoise(backend, color[:, :272], weights=blob, tile_size=240)
    np.testing.assert_array_equal(ignored, _denoise(backend, color[:, :272], weights=blob))


# --- the filter's promises --------------------------------------------------------------------


def test_alpha_is_passed_through_untouched(backend, rng) -> None:
    rgba = rng.random((20, 36, 4), np.float32)
    ours = _denoise(backend, rgba, quality="fast")
    rgb = _denoise(backend, np.ascontiguousarray(rgba[:, :, :3]), quality="fast")
    np.testing.assert_array_equal(ours[:, :, 3], rgba[:, :, 3])
    np.testing.assert_array_equal(ours[:, :, :3], rgb)


def test_in_place_denoising_equals_a_separate_output(backend, rng) -> None:
    color = _hdr(rng, 24, 40)
    albedo, normal = _aux(rng, 24, 40)
    expected = _denoise(backend, color, albedo, normal, hdr=True, quality="fast")
    name, options, _ = backend
    with oidn_gpu.Denoiser(backend=name, hdr=True, quality="fast", **options) as den:
        result = den.denoise(color, albedo, normal, output=color)
    assert result is color
    np.testing.assert_array_equal(color, expected)


def test_half_inputs_give_half_outputs(backend, rng) -> None:
    color = rng.random((16, 24, 3), np.float32)
    ours = _denoise(backend, color.astype(np.float16), quality="fast")
    assert ours.dtype == np.float16
    ref = _denoise(backend, color.astype(np.float16).astype(np.float32), quality="fast")
    np.testing.assert_array_equal(ours, ref.astype(np.float16))


def test_progress_runs_from_zero_to_one_and_cancel_leaves_the_output(backend, rng) -> None:
    name, options, entry = backend
    color = rng.random((entry.tiled_rows, 272, 3), np.float32)
    blob = TINY_COLOR.read_bytes()
    seen: list[float] = []
    tiles = {} if entry.own_tiles else {"tile_size": 240}
    with oidn_gpu.Denoiser(backend=name, weights=blob, **tiles, **options) as den:
        den.denoise(color, progress=seen.append)
        assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
        if entry.progress_steps:
            assert len(seen) > 3
        else:
            assert len(seen) == (3 if entry.progress_per_tile else 2)  # 2 tiles
        for stop_after in (1, 2):  # before the first tile, after the first tile
            output = np.full_like(color, 7.0)
            calls: list[float] = []

            def progress(fraction: float, calls=calls, stop_after=stop_after) -> bool:
                calls.append(fraction)
                return len(calls) < stop_after

            with pytest.raises(CancelledError):
                den.denoise(color, output=output, progress=progress)
            assert len(calls) == stop_after
            assert (output == 7.0).all()


def test_bad_images_and_closed_filters_raise_oidn_errors(backend, rng) -> None:
    name, options, _ = backend
    den = oidn_gpu.Denoiser(backend=name, quality="fast", **options)
    with pytest.raises(InvalidOperationError, match=r"^unsupported input image format"):
        den.denoise(np.zeros((8, 8, 3), np.complex64))
    with pytest.raises(InvalidOperationError, match=r"^unsupported input image format"):
        den.denoise(np.zeros((8, 8, 5), np.float32))
    with pytest.raises(InvalidOperationError, match=r"^image size mismatch"):
        den.denoise(rng.random((8, 8, 3), np.float32), rng.random((8, 9, 3), np.float32))
    empty = den.denoise(np.zeros((0, 5, 3), np.float32))
    assert empty.shape == (0, 5, 3)
    den.close()
    den.close()  # idempotent
    with pytest.raises(InvalidOperationError, match="closed"):
        den.denoise(rng.random((8, 8, 3), np.float32))


# --- the runner seam --------------------------------------------------------------------------


def test_the_backend_runner_runs_a_plan_like_the_filter(backend, rng) -> None:
    name, options, _ = backend
    model = builtin.load_builtin("rt_hdr_small")
    color = _hdr(rng, 24, 40)
    plan = plan_denoise(model, 24, 40, DenoiseOptions(hdr=True, input_scale=0.25))
    impl = get_backend(name)
    executor = impl.create_executor(model, make_options(name, **options))
    try:
        runner = impl.create_runner(executor)
        assert isinstance(runner, TileRunner)
        got = runner.run(DenoiseImages(main=color, out_channels=3), plan)
        runner.close()
    finally:
        executor.close()
    expected = _denoise(backend, color, hdr=True, quality="fast", input_scale=0.25)
    np.testing.assert_array_equal(got, expected)
