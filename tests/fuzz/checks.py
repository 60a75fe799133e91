"""The valid files the fuzz tests mutate, and the checks each mutated file goes through.

Base EXRs are made here by OpenImageIO (16 x 16, each a few kilobytes): multi-layer with
alpha and AOVs, tiled, multi-part, deep, a data window inside a larger display window,
a 32-bit integer ID channel beside a half beauty, and the other compressions. Base
weights are the tiny U-Nets of tests/data (3, 6 and 9 input channels).

The checks run in the fuzz child (`tests.fuzz.harness`): every reader the command line
uses, the EXR round trip, then a whole frame denoised and written on the NumPy reference
backend with tiny weights. A check returns, or raises the project's exception for a bad
file; an `AssertionError` (a wrong result) or any other exception is a defect.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from oidn_gpu import DenoiserConfig, FilterOptions, sequence
from oidn_gpu.image import exr, io
from oidn_gpu.model import load_model
from tests import exr_files

DATA = Path(__file__).resolve().parents[1] / "data"
TINY_WEIGHTS = {3: "tiny_base_ic3.tza", 6: "tiny_large_ic6.tza", 9: "tiny_base_ic9.tza"}
SIZE = 16


def _spec(names: tuple[str, ...], pixel_format: str = "half", compression: str = "zip") -> Any:
    return exr_files.spec(SIZE, SIZE, names, pixel_format, compression)


def _write(path: Path, parts: list[tuple[Any, np.ndarray]]) -> bytes:
    return exr_files.write_parts(path, parts).read_bytes()


def base_exrs(folder: Path, seed: int = 0) -> list[bytes]:
    """The valid EXRs the fuzz cases start from (written into ``folder``)."""
    oiio = exr_files.oiio()
    rng = np.random.default_rng(seed)

    def pixels(channels: int) -> np.ndarray:
        return rng.random((SIZE, SIZE, channels), dtype=np.float32)

    aov = ("R", "G", "B", "A", "albedo.R", "albedo.G", "albedo.B", "N.X", "N.Y", "N.Z")
    tiled = _spec(("R", "G", "B"), "float", "piz")
    tiled.tile_width = tiled.tile_height = 8
    windowed = _spec(("R", "G", "B"), "half", "rle")
    windowed.x, windowed.y = 4, 4
    windowed.full_width = windowed.full_height = SIZE + 8
    ids = _spec(("R", "G", "B", "id"), "half", "none")
    ids.channelformats = (oiio.HALF, oiio.HALF, oiio.HALF, oiio.UINT32)
    beauty = _spec(("R", "G", "B", "A"))
    beauty.attribute("name", "beauty")
    albedo = _spec(("albedo.R", "albedo.G", "albedo.B"), "float")
    albedo.attribute("name", "albedo")
    made = [
        _write(folder / "layers.exr", [(_spec(aov), pixels(len(aov)))]),
        _write(folder / "tiled.exr", [(tiled, pixels(3))]),
        _write(folder / "window.exr", [(windowed, pixels(3))]),
        _write(folder / "ids.exr", [(ids, np.dstack([pixels(3), np.full((SIZE, SIZE), 3.0)]))]),
        _write(folder / "parts.exr", [(beauty, pixels(4)), (albedo, pixels(3))]),
        exr_files.write_deep(folder / "deep.exr", SIZE).read_bytes(),
    ]
    for compression in ("b44", "dwaa", "pxr24", "zips"):
        spec = _spec(("R", "G", "B"), "half", compression)
        made.append(_write(folder / f"{compression}.exr", [(spec, pixels(3))]))
    return made


def base_weights() -> list[bytes]:
    """The tiny weight files of tests/data, as bytes."""
    return [(DATA / name).read_bytes() for name in TINY_WEIGHTS.values()]


def _config(weights: str) -> DenoiserConfig:
    return DenoiserConfig.create(FilterOptions(weights=weights), backend="reference")


@cache
def _color_pool() -> Any:
    weights = str(DATA / TINY_WEIGHTS[3])
    return sequence.DenoiserPool(_config(weights))


def check_exr(data: bytes, folder: Path) -> None:
    """Every reader on a (mutated) EXR, then a denoised frame written as EXR and PNG."""
    path = folder / "case.exr"
    path.write_bytes(data)
    layers = io.list_layers(path)
    for subimage in sorted({layer.subimage for layer in layers}):
        io.read_image(path, subimage)
    exr.write_file(folder / "copy.exr", exr.read_file(path))
    sequence.load_frame(sequence.FrameJob(path, folder / "aux.exr"), sequence.InputOptions())
    for output in (folder / "out.exr", folder / "out.png"):
        job = sequence.FrameJob(path, output)
        options = sequence.SequenceOptions(
            inputs=sequence.InputOptions(auto_aux=False), software="fuzz"
        )
        sequence.denoise_frame(job, _color_pool(), options)
        io.read_image(output)  # what was written decodes


@cache
def _frames(folder: Path) -> dict[int, Path]:
    """One input frame per network input count: color, + albedo, + albedo and normal."""
    rng = np.random.default_rng(1)
    color = rng.random((SIZE, SIZE, 3), dtype=np.float32) * 4
    albedo = rng.random((SIZE, SIZE, 3), dtype=np.float32)
    normal = rng.standard_normal((SIZE, SIZE, 3)).astype(np.float32)
    normal /= np.linalg.norm(normal, axis=2, keepdims=True)
    frames = {}
    for channels, planes in ((3, [color]), (6, [color, albedo]), (9, [color, albedo, normal])):
        names = ("R", "G", "B", "albedo.R", "albedo.G", "albedo.B", "N.X", "N.Y", "N.Z")
        spec = _spec(names[: 3 * len(planes)], "float")
        frames[channels] = folder / f"frame{channels}.exr"
        _write(frames[channels], [(spec, np.dstack(planes))])
    return frames


def check_weights(data: bytes, folder: Path) -> str:
    """Load (mutated) weights; if they load, denoise a frame with them and check that the
    frame's count of non-finite pixels is the count in the file written.

    Returns:
        ``'non-finite'`` or ``'finite'``: whether the output had non-finite pixels.
    """
    model = load_model(data, name="fuzz")
    weights = folder / "case.tza"
    weights.write_bytes(data)
    job = sequence.FrameJob(_frames(folder)[model.input_channels], folder / "out.exr")
    pool = sequence.DenoiserPool(_config(str(weights)))
    try:
        outcome = sequence.denoise_frame(job, pool, sequence.SequenceOptions(software="fuzz"))
    finally:
        pool.close()
    written = io.read_layer(job.output, "").pixels
    bad = int(np.count_nonzero(~np.isfinite(written).all(axis=2)))
    assert outcome.nonfinite_pixels == bad, (
        f"the frame reports {outcome.nonfinite_pixels} non-finite pixels; its output has {bad}"
    )
    return "non-finite" if bad else "finite"
