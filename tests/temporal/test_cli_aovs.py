"""``oidn-gpu denoise frames/ --temporal --aovs-sum key,fill``: light-path layers carried
through the beauty's history (`oidn_gpu.filter_temporal_aovs`), written adding up to the temporal
beauty, the same images as `TemporalAovDenoiser`, locally and after a resumed run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oidn_gpu import TemporalAovDenoiser, TemporalDenoiser
from oidn_gpu.cli import main
from oidn_gpu.image import io
from oidn_gpu.image import motion as motion_passes
from oidn_gpu.sequence.temporal_frames import frame_number, read_depth

oiio = pytest.importorskip("OpenImageIO")

SEQUENCE = Path(__file__).resolve().parents[1] / "data" / "sequences" / "static"
BEAUTY = "ViewLayer.Combined"


def with_light_groups(source: Path, target: Path) -> None:
    """``source`` as float with two light groups ``key`` and ``fill`` whose float32 sum is
    the beauty (which is rewritten so)."""
    inp = oiio.ImageInput.open(str(source))
    spec = inp.spec()
    pixels = inp.read_image(0, 0, 0, spec.nchannels, "float")
    inp.close()
    names = list(spec.channelnames)
    rgb = [names.index(f"{BEAUTY}.{c}") for c in "RGB"]
    share = np.linspace(0.25, 0.75, pixels.shape[1], dtype=np.float32)[None, :, None]
    key = pixels[:, :, rgb] * share
    fill = pixels[:, :, rgb] - key
    pixels[:, :, rgb] = key + fill
    out_names = names + [f"ViewLayer.{g}.{c}" for g in ("key", "fill") for c in "RGB"]
    data = np.concatenate([pixels, key, fill], axis=2).astype(np.float32)
    out_spec = oiio.ImageSpec(spec.width, spec.height, len(out_names), "float")
    out_spec.channelnames = tuple(out_names)
    out = oiio.ImageOutput.create(str(target))
    assert out.open(str(target), out_spec) and out.write_image(data) and out.close()


@pytest.fixture
def frames(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("OIDN_GPU_BACKEND", "reference")
    folder = tmp_path / "in"
    folder.mkdir()
    for number in (1, 2, 3):
        name = f"frame.{number:04d}.exr"
        with_light_groups(SEQUENCE / name, folder / name)
    return folder


def _layer(path: Path, name: str) -> np.ndarray:
    return io.read_layer(path, io.match_layer(io.list_layers(path), name)).pixels[:, :, :3]


def _expected(folder: Path) -> list:
    results = []
    with TemporalAovDenoiser(TemporalDenoiser(hdr=True, backend="reference")) as td:
        for path in sorted(folder.glob("*.exr")):
            motion = motion_passes.read_motion(path)
            vectors = np.where(motion.invalid[..., None], np.nan, motion.backward)
            passes = {g: _layer(path, f"ViewLayer.{g}") for g in ("key", "fill")}
            results.append(
                td.denoise(
                    _layer(path, BEAUTY),
                    passes,
                    _layer(path, "Denoising Albedo"),
                    _layer(path, "Denoising Normal"),
                    motion=vectors,
                    depth=read_depth(path),
                    frame=frame_number(path),
                    summed=None,
                )
            )
    return results


def test_cli_temporal_aovs_sum_gives_the_api_result_adding_up(frames, tmp_path, capsys):
    out = tmp_path / "out"
    args = [
        "denoise",
        str(frames),
        "-o",
        f"{out}/",
        "--temporal",
        "--mkdir",
        "--no-progress",
        "--aovs-sum",
        "key,fill",
    ]
    rc = main(args)
    assert rc == 0, capsys.readouterr().err
    outputs = sorted(out.glob("*.exr"))
    for path, want in zip(outputs, _expected(frames), strict=True):
        beauty = _layer(path, BEAUTY)
        np.testing.assert_array_equal(beauty, want.beauty[:, :, :3])
        key, fill = _layer(path, "ViewLayer.key"), _layer(path, "ViewLayer.fill")
        np.testing.assert_array_equal(key, want.passes["key"])
        total = key.astype(np.float64) + fill
        assert np.abs(total - beauty).max() <= 1e-5 * np.abs(beauty).max()
    # a resumed run (the last frame missing) denoises the complete frames again for their
    # history, passes included, and writes the uninterrupted run's file
    last = outputs[-1].read_bytes()
    outputs[-1].unlink()
    assert main([*args, "--skip-existing"]) == 0, capsys.readouterr().err
    resumed = sorted(out.glob("*.exr"))[-1]
    for name in (BEAUTY, "ViewLayer.key", "ViewLayer.fill"):
        np.testing.assert_array_equal(_layer(resumed, name), _layer_bytes(last, tmp_path, name))


def _layer_bytes(data: bytes, tmp_path: Path, name: str) -> np.ndarray:
    path = tmp_path / "uninterrupted.exr"
    path.write_bytes(data)
    return _layer(path, name)
