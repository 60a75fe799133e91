"""DenoiserConfig: one frozen, picklable value of a denoiser's options, checked once."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from oidn_gpu import Denoiser, DenoiserConfig, FilterOptions, InvalidArgumentError
from oidn_gpu.backends.base import BACKEND_ENV_VAR, get_backend
from tests.datasets import REPO_ROOT

TINY = REPO_ROOT / "tests" / "data" / "tiny_base_ic3.tza"


def _color(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).random((16, 16, 3), dtype=np.float32) * 4


def test_a_config_pickles_and_denoises_as_the_keywords_do() -> None:
    config = DenoiserConfig.create(
        FilterOptions(hdr=True, weights=str(TINY)), backend="reference", threads=1
    )
    assert config.backend == "reference"
    assert config.backend_options == get_backend("reference").Options(threads=1)
    copy = pickle.loads(pickle.dumps(config))
    assert copy == config
    with (
        Denoiser.from_config(copy) as den,
        Denoiser(hdr=True, weights=str(TINY), backend="reference", threads=1) as keywords,
    ):
        assert den.config == keywords.config == config
        assert den.hdr and den.options == config.filter
        assert np.array_equal(den.denoise(_color()), keywords.denoise(_color()))


def test_auto_without_backend_options_is_resolved_where_the_denoiser_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = DenoiserConfig.create(FilterOptions(weights=str(TINY)))
    assert (config.backend, config.backend_options) == ("auto", None)
    monkeypatch.setenv(BACKEND_ENV_VAR, "reference")
    assert config.requested_backend() == "reference"
    with Denoiser.from_config(config) as den:
        assert den.backend == "reference"
        assert den.config.backend == "reference"  # resolved
        assert den.config.backend_options == get_backend("reference").Options()


def test_auto_with_backend_options_picks_the_backend_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BACKEND_ENV_VAR, "reference")
    config = DenoiserConfig.create(backend="auto", threads=2)
    assert config.backend == "reference"
    assert config.backend_options == get_backend("reference").Options(threads=2)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: DenoiserConfig(backend="nope"), r"unknown backend 'nope'"),
        (
            lambda: DenoiserConfig(backend_options=get_backend("reference").Options()),
            r"backend options need the backend they belong to, not backend='auto'",
        ),
        (
            lambda: DenoiserConfig(
                backend="cuda", backend_options=get_backend("reference").Options()
            ),
            r"backend options of type ReferenceOptions do not fit the cuda backend",
        ),
        (lambda: DenoiserConfig(filter={"hdr": True}), r"the filter options are a dict"),
        (
            lambda: DenoiserConfig.create(backend="reference", kernal="auto"),
            r"unknown option 'kernal' \(did you mean 'kernel', an option of the wgpu",
        ),
    ],
)
def test_a_bad_config_is_refused_when_made(make, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        make()


def test_from_config_takes_only_a_config() -> None:
    with pytest.raises(InvalidArgumentError, match=r"the config is a dict; expected"):
        Denoiser.from_config({"backend": "reference"})  # type: ignore[arg-type]


def test_on_gpu_places_a_gpu_backend_and_leaves_a_cpu_one(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = DenoiserConfig.create(backend="reference")
    assert reference.on_gpu(1) == (reference, "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    cuda = DenoiserConfig.create(backend="cuda", precision="bf16")
    placed, where = cuda.on_gpu(5)
    assert placed.backend_options == get_backend("cuda").Options(precision="bf16", device="cuda:1")
    assert where == "cuda:1, CUDA_VISIBLE_DEVICES=3,5"
    assert placed.filter == cuda.filter
    # a device the caller chose is kept
    chosen = DenoiserConfig.create(backend="cuda", device="cuda:0")
    assert chosen.on_gpu(5) == (chosen, "")
    # auto is resolved on the machine the worker runs on
    monkeypatch.setenv(BACKEND_ENV_VAR, "cuda")
    assert DenoiserConfig().on_gpu(3)[0].backend_options.device == "cuda:0"


def test_the_command_line_makes_one_config_that_pickles() -> None:
    from oidn_gpu.cli import build_parser, denoiser_config

    args = build_parser().parse_args(
        [
            "denoise",
            "in.exr",
            "-o",
            "out.exr",
            "--lightmap",
            "--quality",
            "fast",
            "--backend",
            "reference",
            "--threads",
            "2",
            "--tile-size",
            "64",
        ]
    )
    config = denoiser_config(args)
    assert config == DenoiserConfig(
        FilterOptions(filter_type="RTLightmap", quality="fast", tile_size=64),
        "reference",
        get_backend("reference").Options(threads=2),
    )
    assert pickle.loads(pickle.dumps(config)) == config
    # without backend flags, 'auto' is left for where the denoiser is built (a farm's node)
    plain = denoiser_config(build_parser().parse_args(["denoise", "in.exr", "-o", "out.exr"]))
    assert (plain.backend, plain.backend_options) == ("auto", None)
