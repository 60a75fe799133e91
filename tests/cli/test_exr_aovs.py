"""Multi-layer EXRs with each renderer's layer names: AOVs found, layers reported, and
every input part, channel, pixel type and header field kept in the output.

Each file is written with OpenImageIO the way the renderer lays it out (channel names,
per-channel half/float/uint types, data window inside a larger display window, tiles,
compression, attributes, parts) from a crop of the Mitsuba scene textured_checker; the
denoised beauty read back must be within 1e-5 (relative L2) of ``oidn_gpu.denoise`` on
the same images, and every channel that was not denoised must come back bit for bit.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_support import PARITY_REL_L2, leftovers, rel_l2

import oidn_gpu
from oidn_gpu.image import aovs, io

SIZE = 24  # px: the reference backend is slow; 24 keeps each denoise well under a second


@dataclass(frozen=True)
class Layout:
    """How one renderer writes a frame: parts of (channel, pixel type, source) lists."""

    renderer: str
    parts: tuple[tuple[tuple[str, str, str], ...], ...]
    beauty: str  # the layer the beauty is found in
    albedo: str | None
    normal: str | None
    window: tuple[int, int, int, int] = (0, 0, SIZE, SIZE)  # x, y, full width, full height
    tiles: int = 0
    compression: str = "zip"
    attributes: dict[str, Any] = field(default_factory=dict)
    part_names: tuple[str, ...] = ()
    beauty_channels: tuple[str, ...] = ()  # when not '<beauty>.R', ...


def _rgb(layer: str, kind: str, fmt: str = "float", comps: str = "RGB") -> tuple:
    prefix = f"{layer}." if layer else ""
    return tuple((f"{prefix}{c}", fmt, f"{kind}{i}") for i, c in enumerate(comps))


LAYOUTS = [
    Layout(
        "Blender Cycles",
        (
            _rgb("ViewLayer.Combined", "color", comps="RGBA")
            + _rgb("ViewLayer.Denoising Albedo", "albedo", "half")
            + _rgb("ViewLayer.Denoising Normal", "normal", "half", "XYZ")
            + _rgb("ViewLayer.DiffDir", "extra", "half")
            + (("ViewLayer.Depth.Z", "float", "depth"),),
        ),
        "ViewLayer.Combined",
        "ViewLayer.Denoising Albedo",
        "ViewLayer.Denoising Normal",
        window=(10, 20, 300, 300),
        tiles=16,
        compression="zip",
        attributes={"cycles.ViewLayer.samples": "16", "Note": "Blender 4.2"},
    ),
    Layout(
        "Arnold",
        (
            _rgb("RGBA", "color", comps="RGBA")
            + _rgb("albedo", "albedo", "half")
            + _rgb("N", "normal", "float", "XYZ")
            + _rgb("diffuse_direct", "extra", "half")
            + (("Z", "float", "depth"),),
        ),
        "RGBA",
        "albedo",
        "N",
        compression="piz",
        attributes={"arnold/version": "7.3"},
    ),
    Layout(
        "V-Ray",
        (
            _rgb("", "color", comps="RGBA")
            + _rgb("VRayDiffuseFilter", "albedo", "half")
            + _rgb("VRayNormals", "normal", "half", "XYZ")
            + _rgb("VRayReflection", "extra", "half")
            + (("VRayRenderID.R", "uint", "id"),),
        ),
        "",
        "VRayDiffuseFilter",
        "VRayNormals",
        window=(0, 0, 40, 30),
        tiles=8,
    ),
    Layout(
        "Redshift",
        (
            _rgb("", "color", comps="RGBA"),
            _rgb("DiffuseFilter", "albedo", "half"),
            _rgb("N", "normal", "float", "XYZ") + _rgb("BumpNormals", "normal", "half", "XYZ"),
        ),
        "rgba",  # a part's name prefixes the channels it does not name
        "DiffuseFilter",
        "normals.BumpNormals",
        compression="zips",
        part_names=("rgba", "DiffuseFilter", "normals"),
        beauty_channels=("R", "G", "B"),
    ),
    Layout(
        "RenderMan",
        (
            (
                *_rgb("Ci", "color"),
                ("a", "half", "alpha"),
                *_rgb("albedo", "albedo", "half"),
                *_rgb("normal", "normal", "half", "XYZ"),
                ("mse.R", "half", "extra0"),
            ),
        ),
        "Ci",
        "albedo",
        "normal",
        compression="rle",
    ),
    Layout(
        "Karma",
        (
            _rgb("C", "color", comps="RGBA")
            + _rgb("albedo", "albedo", "half")
            + _rgb("N", "normal", "half", "XYZ")
            + (("Pz", "float", "depth"),),
        ),
        "C",
        "albedo",
        "N",
        window=(4, 2, 32, 32),
        attributes={"houdini:hip": "shot.hip"},
    ),
    Layout(
        "Octane",
        (
            _rgb("Beauty", "color", comps="RGBA")
            + _rgb("Denoise Albedo", "albedo", "half")
            + _rgb("Denoise Normal", "normal", "half", "XYZ")
            + _rgb("Emitters", "extra", "half"),
        ),
        "Beauty",
        "Denoise Albedo",
        "Denoise Normal",
        tiles=32,
    ),
    Layout(
        "Mitsuba",
        (
            _rgb("", "color", comps="RGBA")
            + _rgb("albedo", "albedo")
            + _rgb("nn", "normal", "float", "XYZ"),
        ),
        "",
        "albedo",
        "nn",
    ),
    Layout(
        "Unreal Movie Render Queue",
        (
            _rgb("", "color", comps="RGBA")
            + _rgb("BaseColor", "albedo", "half")
            + _rgb("WorldNormal", "normal", "half")
            + _rgb("SceneDepth", "extra", "float"),
        ),
        "",
        "BaseColor",
        "WorldNormal",
    ),
    Layout(
        "LuxCore",
        (
            _rgb("RGB_IMAGEPIPELINE", "color")
            + _rgb("ALBEDO", "albedo")
            + _rgb("SHADING_NORMAL", "extra", "float", "XYZ")
            + _rgb("AVG_SHADING_NORMAL", "normal", "float", "XYZ"),
        ),
        "RGB_IMAGEPIPELINE",
        "ALBEDO",
        "AVG_SHADING_NORMAL",  # LuxCore's OIDN plugin takes the averaged one
    ),
    Layout(
        "Nuke",
        (
            _rgb("", "color", comps="RGBA")
            + _rgb("diffuse_albedo", "albedo", "half")
            + _rgb("Nworld", "normal", "half")
            + _rgb("Pworld", "extra", "float"),
        ),
        "",
        "diffuse_albedo",
        "Nworld",
    ),
]


def _sources(crop: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    h, w = crop["color_4spp"].shape[:2]
    out: dict[str, np.ndarray] = {}
    for i in range(3):
        out[f"color{i}"] = crop["color_4spp"][:, :, i]
        out[f"albedo{i}"] = crop["albedo"][:, :, i]
        out[f"normal{i}"] = crop["normal"][:, :, i]
        out[f"extra{i}"] = crop["color_4spp"][:, :, i] * 0.5 + rng.random((h, w)) * 0.1
    out["color3"] = out["alpha"] = np.clip(rng.random((h, w)) * 2, 0, 1)
    out["depth"] = rng.random((h, w)) * 100
    out["id"] = rng.integers(0, 2**32 - 1, (h, w)).astype(np.float64)  # exact in float64
    return out


def write_layout(path: Path, layout: Layout, sources: dict[str, np.ndarray]) -> Path:
    """Write ``layout`` with OpenImageIO: one part per entry of ``layout.parts``."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    specs, planes = [], []
    for index, channels in enumerate(layout.parts):
        h, w = sources["color0"].shape
        spec = oiio.ImageSpec(w, h, len(channels), "float")
        spec.channelnames = tuple(c for c, _, _ in channels)
        spec.channelformats = tuple(oiio.TypeDesc(f) for _, f, _ in channels)
        spec.x, spec.y, spec.full_width, spec.full_height = layout.window
        if layout.tiles:
            spec.tile_width = spec.tile_height = layout.tiles
        spec.attribute("compression", layout.compression)
        for name, value in layout.attributes.items():
            spec.attribute(name, value)
        if layout.part_names:
            spec.attribute("name", layout.part_names[index])
        specs.append(spec)
        planes.append(np.stack([sources[s] for _, _, s in channels], axis=2).astype(np.float64))
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), tuple(specs)) if len(specs) > 1 else out.open(str(path), specs[0])
    for index, (spec, data) in enumerate(zip(specs, planes, strict=True)):
        if index:
            assert out.open(str(path), spec, "AppendSubimage"), out.geterror()
        assert out.write_image(data), out.geterror()
    assert out.close()
    return path


def read_parts(path: Path) -> list[tuple[Any, np.ndarray]]:
    """(spec, float64 pixels) of every part, as OpenImageIO reads them."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    inp = oiio.ImageInput.open(str(path))
    assert inp is not None, oiio.geterror()
    parts = []
    index = 0
    while inp.seek_subimage(index, 0):
        spec = oiio.ImageSpec(inp.spec())
        parts.append((spec, np.asarray(inp.read_image(index, 0, 0, spec.nchannels, "double"))))
        index += 1
    inp.close()
    return parts


def _header(spec: Any) -> dict[str, Any]:
    formats = spec.channelformats or (spec.format,) * spec.nchannels
    return {
        "window": (spec.x, spec.y, spec.width, spec.height),
        "display": (spec.full_x, spec.full_y, spec.full_width, spec.full_height),
        "tiles": (spec.tile_width, spec.tile_height, spec.tile_depth),
        "formats": dict(zip(spec.channelnames, (str(f) for f in formats), strict=True)),
    }


def _attributes(spec: Any) -> dict[str, Any]:
    skip = {"Software", "oiio:subimages"}
    return {a.name: a.value for a in spec.extra_attribs if a.name not in skip}


def assert_everything_kept(source: Path, output: Path, replaced: set[str]) -> None:
    """Every part, channel (name and pixel type), window, tiling and attribute of
    ``source`` is in ``output``; channels not in ``replaced`` hold the same bits."""
    before, after = read_parts(source), read_parts(output)
    assert len(after) == len(before)
    for (spec_in, pix_in), (spec_out, pix_out) in zip(before, after, strict=True):
        head_in, head_out = _header(spec_in), _header(spec_out)
        for key in ("window", "display", "tiles"):
            assert head_out[key] == head_in[key], key
        assert head_in["formats"].items() <= head_out["formats"].items()
        attrs_in, attrs_out = _attributes(spec_in), _attributes(spec_out)
        assert attrs_in.items() <= attrs_out.items(), set(attrs_in.items()) - set(attrs_out.items())
        assert str(spec_out.getattribute("Software")).startswith("oidn-gpu")
        index_out = {c: i for i, c in enumerate(spec_out.channelnames)}
        for i, name in enumerate(spec_in.channelnames):
            if name not in replaced:
                np.testing.assert_array_equal(pix_out[:, :, index_out[name]], pix_in[:, :, i])


def _beauty_names(layout: Layout) -> list[str]:
    if layout.beauty_channels:
        return list(layout.beauty_channels)
    prefix = f"{layout.beauty}." if layout.beauty else ""
    return [f"{prefix}{c}" for c in "RGB"]


def _api_result(path: Path, layout: Layout, **kwargs: Any) -> np.ndarray:
    color = io.read_layer(path, layout.beauty or ",".join(_beauty_names(layout))).pixels[..., :3]
    albedo = io.read_layer(path, layout.albedo).pixels if layout.albedo else None
    normal = io.read_layer(path, layout.normal).pixels if layout.normal else None
    return oidn_gpu.denoise(color, albedo, normal, hdr=True, backend="reference", **kwargs)


def _channels(path: Path, names: list[str]) -> np.ndarray:
    return io.read_layer(path, ",".join(names)).pixels


@pytest.fixture
def sources(scene, rng: np.random.Generator) -> dict[str, np.ndarray]:
    return _sources(scene(SIZE, offset=20), rng)


def test_the_name_table_covers_every_renderer_in_the_docs() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "aovs.md").read_text()
    for entry in aovs.RENDERER_AOVS:
        assert entry.renderer in docs
        for name in entry.beauty + entry.albedo + entry.normal:
            assert (f"`{name}`" if name else "(root)") in docs, (entry.renderer, name)
    tested = {layout.renderer for layout in LAYOUTS}
    assert tested == {entry.renderer for entry in aovs.RENDERER_AOVS}


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: layout.renderer)
def test_renderer_layout_round_trips_with_the_denoised_beauty(
    cli, layout: Layout, sources, tmp_path: Path
) -> None:
    src = write_layout(tmp_path / "shot.0001.exr", layout, sources)
    out = tmp_path / "shot_dn.0001.exr"
    result = cli("denoise", src, "-o", tmp_path / "shot_dn.####.exr", "--no-progress", "--json")
    assert result.rc == 0, result.err
    assert leftovers(tmp_path) == []

    frame = json.loads(result.out)["results"][0]
    assert frame["output"] == str(out)
    assert frame["layers"]["color"] == (layout.beauty or "(root)")
    assert frame["layers"]["albedo"] == layout.albedo
    assert frame["layers"]["normal"] == layout.normal
    line = f"color '{layout.beauty or '(root)'}'"
    assert f"frame 1/1 {src}: {line}" in result.err  # the per-frame log line
    assert f"layers used: {line}" in result.err  # the summary
    assert "warning" not in result.err

    assert_everything_kept(src, out, replaced=set(_beauty_names(layout)))
    denoised = _channels(out, _beauty_names(layout))
    assert rel_l2(denoised, _api_result(src, layout)) <= PARITY_REL_L2


def test_a_new_layer_beside_the_noisy_beauty(cli, sources, tmp_path: Path) -> None:
    layout = LAYOUTS[0]  # Blender
    src = write_layout(tmp_path / "b.exr", layout, sources)
    out = tmp_path / "o.exr"
    result = cli("denoise", src, "-o", out, "--layer-name", "Denoised", "--quality", "fast")
    assert result.rc == 0, result.err
    assert_everything_kept(src, out, replaced=set())  # the noisy beauty is kept as it was
    new = [f"ViewLayer.Denoised.{c}" for c in "RGBA"]
    formats = _header(read_parts(out)[0][0])["formats"]
    assert [formats[n] for n in new] == ["float"] * 4  # the beauty's pixel type
    values = _channels(out, new)
    assert rel_l2(values[..., :3], _api_result(src, layout, quality="fast")) <= PARITY_REL_L2
    np.testing.assert_array_equal(values[..., 3], _channels(src, ["ViewLayer.Combined.A"])[..., 0])


def test_only_the_beauty_keeps_its_header(cli, sources, tmp_path: Path) -> None:
    layout = LAYOUTS[0]
    src = write_layout(tmp_path / "b.exr", layout, sources)
    out = tmp_path / "o.exr"
    assert cli("denoise", src, "-o", out, "--only-beauty", "--quality", "fast").rc == 0
    ((spec_in, _),) = read_parts(src)
    ((spec_out, _),) = read_parts(out)
    assert spec_out.channelnames == tuple(f"ViewLayer.Combined.{c}" for c in "RGBA")
    for key in ("window", "display", "tiles"):
        assert _header(spec_out)[key] == _header(spec_in)[key]
    assert _attributes(spec_in).items() <= _attributes(spec_out).items()


def test_aovs_are_denoised_guided_or_color_only_into_the_same_file(
    cli, sources, tmp_path: Path
) -> None:
    layout = Layout(
        "Blender Cycles",
        (LAYOUTS[0].parts[0] + _rgb("ViewLayer.Shadow Catcher", "extra", "float", "RGB"),),
        "ViewLayer.Combined",
        "ViewLayer.Denoising Albedo",
        "ViewLayer.Denoising Normal",
    )
    src = write_layout(tmp_path / "b.exr", layout, sources)
    out = tmp_path / "o.exr"
    result = cli(
        "denoise",
        src,
        "-o",
        out,
        "--quality",
        "fast",
        "--aovs",
        "DiffDir,Shadow Catcher",
        "--json",
    )
    assert result.rc == 0, result.err
    layers = json.loads(result.out)["results"][0]["layers"]
    assert layers["aovs"] == [
        {"layer": "ViewLayer.DiffDir", "guided": True},
        {"layer": "ViewLayer.Shadow Catcher", "guided": False},
    ]
    diff = [f"ViewLayer.DiffDir.{c}" for c in "RGB"]
    shadow = [f"ViewLayer.Shadow Catcher.{c}" for c in "RGB"]
    assert_everything_kept(src, out, replaced=set(_beauty_names(layout) + diff + shadow))
    albedo = io.read_layer(src, layout.albedo).pixels
    normal = io.read_layer(src, layout.normal).pixels
    expected_diff = oidn_gpu.denoise(
        _channels(src, diff), albedo, normal, hdr=True, quality="fast", backend="reference"
    )
    expected_shadow = oidn_gpu.denoise(
        _channels(src, shadow), hdr=True, quality="fast", backend="reference"
    )
    # DiffDir is stored as half: the output holds the API's result rounded to half
    np.testing.assert_array_equal(
        _channels(out, diff), expected_diff.astype(np.float16).astype(np.float32)
    )
    assert rel_l2(_channels(out, shadow), expected_shadow) <= PARITY_REL_L2


def test_a_normal_without_albedo_is_left_out_with_one_warning(cli, sources, tmp_path: Path) -> None:
    layout = Layout(
        "V-Ray",
        (_rgb("", "color", comps="RGBA") + _rgb("VRayNormals", "normal", "half", "XYZ"),),
        "",
        None,
        None,
    )
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2):
        write_layout(frames / f"v.{i:04d}.exr", layout, sources)
    result = cli("denoise", frames, "-o", tmp_path / "out", "--mkdir", "--quality", "fast")
    assert result.rc == 0, result.err
    assert result.err.count("warning:") == 1
    assert "has a normal ('VRayNormals') but no albedo" in result.err
    assert "--albedo-layer" in result.err and "'VRayDiffuseFilter'" in result.err
    expected = _api_result(frames / "v.0001.exr", layout, quality="fast")
    assert rel_l2(_channels(tmp_path / "out" / "v.0001.exr", list("RGB")), expected) <= 1e-5


def test_no_aux_at_all_warns_once_and_says_how_to_name_them(cli, sources, tmp_path: Path) -> None:
    layout = Layout("plain", (_rgb("", "color", comps="RGBA"),), "", None, None)
    frames = tmp_path / "frames"
    frames.mkdir()
    for i in (1, 2):
        write_layout(frames / f"p{i}.exr", layout, sources)
    result = cli("denoise", frames, "-o", tmp_path / "out", "--mkdir", "--quality", "fast")
    assert result.rc == 0, result.err
    assert result.err.count("warning:") == 1
    assert "has no albedo or normal layer" in result.err
    # a file of one image has no layer to name: the albedo and normal come as files
    assert "with --albedo FILE and --normal FILE" in result.err
    quiet = cli(
        "denoise", frames, "-o", tmp_path / "out", "--overwrite", "--no-aux", "--quality", "fast"
    )
    assert quiet.rc == 0 and "warning" not in quiet.err


def test_layer_options_need_an_exr(cli, sources, tmp_path: Path) -> None:
    src = write_layout(tmp_path / "b.exr", LAYOUTS[0], sources)
    result = cli("denoise", src, "-o", tmp_path / "o.pfm", "--layer-name", "Denoised")
    assert result.rc == 2 and "--layer-name writes layers into an EXR" in result.err
    result = cli("denoise", src, "-o", tmp_path / "o.exr", "--only-beauty", "--aovs", "DiffDir")
    assert result.rc == 2 and "cannot be used with --aovs" in result.err
    result = cli("denoise", src, "-o", tmp_path / "o.exr", "--aovs", "Nope", "--quality", "fast")
    assert result.rc == 1 and "has no layer 'Nope' (--aovs)" in result.err
    assert not (tmp_path / "o.exr").exists()


def test_every_renderer_name_is_looked_for() -> None:
    tables = {
        "beauty": io.COLOR_LAYER_NAMES,
        "albedo": io.ALBEDO_LAYER_NAMES,
        "normal": io.NORMAL_LAYER_NAMES,
    }
    for entry in aovs.RENDERER_AOVS:
        for kind, names in tables.items():
            folded = {n.casefold() for n in names}
            for name in getattr(entry, kind):
                assert name.casefold() in folded, (entry.renderer, kind, name)


def test_a_mip_mapped_input_gives_its_full_resolution_level(cli, scene, tmp_path: Path) -> None:
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    color = scene(SIZE)["color_4spp"]
    buf = oiio.ImageBuf(oiio.ImageSpec(SIZE, SIZE, 3, "float"))
    buf.set_pixels(oiio.ROI(0, SIZE, 0, SIZE, 0, 1, 0, 3), color)
    config = oiio.ImageSpec()
    config.tile_width = config.tile_height = 16
    config.attribute("compression", "zip")
    src = tmp_path / "tex.exr"
    assert oiio.ImageBufAlgo.make_texture(oiio.MakeTxTexture, buf, str(src), config)
    out = tmp_path / "o.exr"
    result = cli("denoise", src, "-o", out, "--no-aux", "--quality", "fast")
    assert result.rc == 0, result.err
    inp = oiio.ImageInput.open(str(out))
    assert not inp.seek_subimage(0, 1)  # one level: the coarser ones would still be noisy
    assert inp.spec().tile_width == 16
    inp.close()
    expected = oidn_gpu.denoise(
        io.read_layer(src, "").pixels, hdr=True, quality="fast", backend="reference"
    )
    assert rel_l2(io.read_layer(out, "").pixels, expected) <= PARITY_REL_L2


# Arnold's layout with a half beauty (its Z and N stay float)
HALF_BEAUTY = replace(
    LAYOUTS[1],
    renderer="Arnold, half beauty",
    parts=(tuple((c, "half" if c[:5] == "RGBA." else f, k) for c, f, k in LAYOUTS[1].parts[0]),),
)


@pytest.mark.parametrize(
    ("flags", "beauty"),
    [
        ((), "RGBA"),
        (("--layer-name", "Denoised"), "Denoised"),
        (("--aovs", "diffuse_direct"), "RGBA"),
        (("--only-beauty",), "RGBA"),
    ],
)
def test_a_half_beauty_stays_half_beside_a_float_z_in_every_mode(
    cli, sources, tmp_path: Path, flags: tuple[str, ...], beauty: str
) -> None:
    """The denoised beauty keeps its pixel type (half) whatever other channels the file
    holds (Arnold's float Z), also when --only-beauty leaves only half channels."""
    src = write_layout(tmp_path / "b.exr", HALF_BEAUTY, sources)
    out = tmp_path / "o.exr"
    result = cli("denoise", src, "-o", out, "--quality", "fast", *flags)
    assert result.rc == 0, result.err
    ((spec, _),) = read_parts(out)
    formats = _header(spec)["formats"]
    assert {formats[f"{beauty}.{c}"] for c in "RGBA"} == {"half"}, formats
    if "--only-beauty" in flags:
        assert formats == {f"RGBA.{c}": "half" for c in "RGBA"}
    else:
        assert formats["Z"] == "float" and formats["N.X"] == "float"


def test_the_root_layer_is_named_as_the_listing_shows_it(cli, tmp_path, scene) -> None:
    from cli_support import write_multilayer

    crop = scene(24)
    path = write_multilayer(tmp_path / "in.exr", {"": crop["color_4spp"], "mask": crop["albedo"]})
    listing = cli("denoise", path, "--list-layers")
    assert "  (root): R, G, B" in listing.out
    weights = Path(__file__).resolve().parents[1] / "data" / "tiny_base_ic3.tza"
    named = cli(
        "denoise",
        path,
        "-o",
        tmp_path / "named.exr",
        "--color-layer",
        "(root)",
        "--weights",
        weights,
        "--no-aux",
        "--only-beauty",
    )
    assert named.rc == 0, named.err
    found = cli(
        "denoise",
        path,
        "-o",
        tmp_path / "found.exr",
        "--weights",
        weights,
        "--no-aux",
        "--only-beauty",
    )
    assert found.rc == 0, found.err
    a = io.read_image(tmp_path / "named.exr").pixels
    np.testing.assert_array_equal(a, io.read_image(tmp_path / "found.exr").pixels)
