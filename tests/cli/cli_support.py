"""Helpers for the command-line tests (imported by the test modules).

The crops come from the Mitsuba scene ``textured_checker`` (tests/data/scenes) so the
CLI runs on real renderer output; they are small (48-64 px) because the NumPy
reference backend is slow. Outputs are compared with Intel OIDN 2.5.1 (pyoidn)
on the same crop by relative L2 error.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from oidn_gpu.files import TEMP_PREFIX
from oidn_gpu.image import io
from tests import compare, oracle

# Where tests/data/scenes/textured_checker_wide starts in the scene (scripts/make_test_data.py):
# box edge, sphere and checker floor.
CROP_Y, CROP_X = 300, 260

# Relative L2 between our float32 output and OIDN's: float32 rounding in the convolutions
# gives ~1e-6 (shared/reference/oidn-semantics.md section 11); the issue asks for <= 1e-5.
PARITY_REL_L2 = 1e-5


def write_exr(path: Path, pixels: np.ndarray, pixel_format: str = "float") -> Path:
    """A plain float EXR (R, G, B[, A])."""
    return io.write_image_atomic(path, pixels, pixel_format=pixel_format)


def write_multilayer(
    path: Path, layers: dict[str, np.ndarray], pixel_format: str = "float"
) -> Path:
    """One EXR holding several layers: ``{'': color, 'albedo': ..., 'nn': ...}``.

    Channel suffixes are R, G, B (A for a 4th channel), or X, Y, Z for layers whose
    name contains 'normal', 'nn' or 'N'.
    """
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's usual alias

    names: list[str] = []
    planes: list[np.ndarray] = []
    for layer, pixels in layers.items():
        vector = layer.split(".")[-1] in ("nn", "N", "Normal", "Denoising Normal", "normal")
        comps = ["X", "Y", "Z"] if vector else ["R", "G", "B", "A"]
        for c in range(pixels.shape[2]):
            names.append(f"{layer}.{comps[c]}" if layer else comps[c])
            planes.append(pixels[:, :, c])
    data = np.stack(planes, axis=2).astype(np.float32)
    spec = oiio.ImageSpec(data.shape[1], data.shape[0], data.shape[2], pixel_format)
    spec.channelnames = tuple(names)
    spec.attribute("compression", "zip")
    out = oiio.ImageOutput.create(str(path))
    assert out.open(str(path), spec), oiio.geterror()
    assert out.write_image(data)
    out.close()
    return path


def rel_l2(actual: np.ndarray, expected: np.ndarray) -> float:
    """||actual - expected|| / ||expected|| over all pixels and channels (tests/compare.py)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
    return compare.rel_l2(a, e)


def oidn(*args: object, **kwargs: object) -> np.ndarray:
    """Intel OIDN 2.5.1 through pyoidn (tests/oracle.py)."""
    return oracle.oidn_denoise(*args, **kwargs)


def leftovers(folder: Path) -> list[str]:
    """Temporary files our atomic writer would leave behind if it were broken."""
    return sorted(p.name for p in folder.rglob("*") if p.name.startswith(TEMP_PREFIX))


def pythonpath_env() -> dict[str, str]:
    """Environment for running ``python -m oidn_gpu`` in a subprocess."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["OIDN_GPU_BACKEND"] = "reference"
    return env
