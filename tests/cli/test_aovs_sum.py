"""``oidn-gpu denoise --aovs-sum`` and ``--alpha denoise`` on Mitsuba frames (tests/data/aovs,
made by scripts/render_aovs.py): the light-path layers written back add up to the denoised
beauty, match `Denoiser.denoise_aovs`, and every other channel of the file comes back bit for
bit; the alpha channel is denoised in place."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

import oidn_gpu
from oidn_gpu.filter_alpha import alpha_config, denoise_alpha

DATA = Path(__file__).resolve().parents[1] / "data" / "aovs"


def read_exr(path: Path) -> tuple[list[str], dict[str, np.ndarray], list[str]]:
    """Channel names, channel -> values, and each channel's pixel type."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    buf = oiio.ImageBuf(str(path))
    spec = buf.spec()
    pixels = buf.get_pixels(oiio.FLOAT)
    names = list(spec.channelnames)
    formats = [str(f) for f in spec.channelformats] or [str(spec.format)] * len(names)
    return names, dict(zip(names, np.moveaxis(pixels, 2, 0), strict=True)), formats


def rgb(channels: dict[str, np.ndarray], prefix: str, comps: str = "RGB") -> np.ndarray:
    dot = f"{prefix}." if prefix else ""
    return np.stack([channels[dot + c] for c in comps], axis=2)


def test_light_path_layers_sum_to_the_beauty_and_the_rest_is_kept(cli, tmp_path: Path) -> None:
    src = DATA / "light_groups.exr"
    out = tmp_path / "out.exr"
    result = cli("denoise", src, "-o", out, "--aovs-sum", "key,fill", "--json")
    assert result.rc == 0, result.err
    layers = json.loads(result.out)["results"][0]["layers"]
    assert layers["aovs"] == [
        {"layer": "key", "guided": True},
        {"layer": "fill", "guided": True},
    ]
    names, before, formats = read_exr(src)
    out_names, after, out_formats = read_exr(out)
    assert (out_names, out_formats) == (names, formats)
    replaced = {f"{p}{c}" for p in ("", "key.", "fill.") for c in "RGB"}
    for name in set(names) - replaced:  # albedo, normal and the depth pass
        np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    beauty, key, fill = rgb(after, ""), rgb(after, "key"), rgb(after, "fill")
    total = key.astype(np.float64) + fill
    assert np.abs(total - beauty).max() <= 1e-5 * np.abs(beauty).max()
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        expected = den.denoise_aovs(
            rgb(before, ""),
            {"key": rgb(before, "key"), "fill": rgb(before, "fill")},
            rgb(before, "albedo"),
            rgb(before, "N", "XYZ"),
        )
    np.testing.assert_allclose(beauty, expected.beauty, rtol=1e-5, atol=1e-6)
    for name, values in (("key", key), ("fill", fill)):
        np.testing.assert_allclose(values, expected.passes[name], rtol=1e-5, atol=1e-6)


def test_utility_layers_in_aovs_are_denoised_but_not_summed(cli, tmp_path: Path) -> None:
    src = DATA / "light_groups.exr"
    out = tmp_path / "out.exr"
    result = cli("denoise", src, "-o", out, "--aovs", "albedo", "--aovs-sum", "key,fill")
    assert result.rc == 0, result.err
    _, before, _ = read_exr(src)
    _, after, _ = read_exr(out)
    with oidn_gpu.Denoiser(backend="reference", hdr=True) as den:
        albedo = den.denoise(rgb(before, "albedo"), rgb(before, "albedo"), rgb(before, "N", "XYZ"))
    np.testing.assert_allclose(rgb(after, "albedo"), albedo, rtol=1e-5, atol=1e-6)
    total = rgb(after, "key").astype(np.float64) + rgb(after, "fill")
    assert np.abs(total - rgb(after, "")).max() <= 1e-5 * np.abs(rgb(after, "")).max()


def test_alpha_denoise_writes_the_denoised_alpha(cli, tmp_path: Path) -> None:
    src = DATA / "alpha.exr"
    copied, denoised = tmp_path / "copy.exr", tmp_path / "denoised.exr"
    assert cli("denoise", src, "-o", copied).rc == 0
    result = cli("denoise", src, "-o", denoised, "--alpha", "denoise")
    assert result.rc == 0, result.err
    _, before, _ = read_exr(src)
    _, plain, _ = read_exr(copied)
    names, after, _ = read_exr(denoised)
    np.testing.assert_array_equal(plain["A"], before["A"])  # the default copies it
    for name in set(names) - {"A"}:
        np.testing.assert_array_equal(after[name], plain[name], err_msg=name)
    _, ref, _ = read_exr(DATA / "alpha_ref.exr")
    noisy_error = np.sqrt(np.mean((before["A"] - ref["A"]) ** 2))
    error = np.sqrt(np.mean((after["A"] - ref["A"]) ** 2))
    assert error * 1.5 <= noisy_error


def test_every_frame_of_a_sequence_keeps_the_sum(cli, tmp_path: Path) -> None:
    frames, out = tmp_path / "frames", tmp_path / "out"
    frames.mkdir()
    for number in (1, 2):
        shutil.copy(DATA / "light_groups.exr", frames / f"shot.{number:04d}.exr")
    result = cli("denoise", frames, "-o", out, "--mkdir", "--aovs-sum", "key,fill", "--json")
    assert result.rc == 0, result.err
    assert [r["status"] for r in json.loads(result.out)["results"]] == ["done", "done"]
    for number in (1, 2):
        _, after, _ = read_exr(out / f"shot.{number:04d}.exr")
        beauty = rgb(after, "")
        total = rgb(after, "key").astype(np.float64) + rgb(after, "fill")
        assert np.abs(total - beauty).max() <= 1e-5 * np.abs(beauty).max()


def test_alpha_denoise_in_temporal_mode_denoises_each_frame_s_alpha(cli, tmp_path: Path) -> None:
    frames = tmp_path / "frames"
    frames.mkdir()
    source = Path(__file__).resolve().parents[1] / "data" / "sequences" / "static"
    for number in (1, 2, 3):
        shutil.copy(source / f"frame.{number:04d}.exr", frames)
    plain, denoised = tmp_path / "plain", tmp_path / "denoised"
    assert cli("denoise", frames, "-o", plain, "--mkdir", "--temporal").rc == 0
    result = cli("denoise", frames, "-o", denoised, "--mkdir", "--temporal", "--alpha", "denoise")
    assert result.rc == 0, result.err
    alpha_name = "ViewLayer.Combined.A"
    config = alpha_config(oidn_gpu.Denoiser(backend="reference").config)
    with oidn_gpu.Denoiser.from_config(config) as den:
        for number in (1, 2, 3):
            name = f"frame.{number:04d}.exr"
            _, before, _ = read_exr(frames / name)
            names, after, _ = read_exr(denoised / name)
            _, expected_rest, _ = read_exr(plain / name)
            for channel in set(names) - {alpha_name}:  # the temporal colour is unchanged
                np.testing.assert_array_equal(after[channel], expected_rest[channel])
            albedo = rgb(before, "ViewLayer.Denoising Albedo")
            alpha = denoise_alpha(den, before[alpha_name], albedo)
            # the file's alpha is half: the API's result rounded to half (within one step)
            half = alpha.astype(np.float16).astype(np.float32)
            np.testing.assert_allclose(after[alpha_name], half, rtol=0, atol=2**-10)
            assert not np.array_equal(after[alpha_name], before[alpha_name])


def test_aovs_sum_usage_errors(cli, tmp_path: Path) -> None:
    src = DATA / "light_groups.exr"
    result = cli("denoise", src, "-o", tmp_path / "o.exr", "--aovs-sum", "key", "--only-beauty")
    assert result.rc != 0 and "--only-beauty" in result.err and "--aovs-sum" in result.err
    result = cli("denoise", src, "-o", tmp_path / "o.png", "--aovs-sum", "key,fill")
    assert result.rc != 0 and "--aovs-sum writes layers into an EXR" in result.err
    result = cli("denoise", src, "-o", tmp_path / "o.exr", "--aovs-sum", "key,spec")
    assert result.rc != 0 and "no layer 'spec'" in result.err


def test_the_sum_rule_is_documented_and_linked_from_the_readme() -> None:
    root = Path(__file__).resolve().parents[2]
    docs = (root / "docs" / "aovs.md").read_text(encoding="utf-8")
    readme = (root / "README.md").read_text(encoding="utf-8")
    assert "## Light-path passes that add up to the beauty" in docs
    assert "w_i = (|P_i| + eps) / sum_j (|P_j| + eps)" in docs
    assert "## Alpha" in docs and "--alpha denoise" in docs
    assert "docs/aovs.md#light-path-passes-that-add-up-to-the-beauty" in readme
    assert "--aovs-sum" in readme
