"""Where the test suite's data comes from.

Everything the default run needs ships with the repository:

- ``tests/data/``: tiny generated ``.tza`` models, recorded programs, and crops of
  the four Mitsuba test scenes (``tests/data/scenes/``, written by
  ``scripts/make_test_data.py``), read here by `scene_crop`;
- the official weights bundled with the package (`bundled_weights_dir`);
- Intel OIDN 2.5.1's outputs, computed live through ``pyoidn`` (``tests/oracle.py``).

The full-size data set is optional: a folder holding ``weights/`` (all 23 official
weights, the three ``*_large`` ones included) and ``testdata/scenes/`` (the full
512 px scenes with OIDN's stored outputs), named by ``OIDN_GPU_SHARED`` or found as
``shared/`` beside the checkout. Tests that need it carry the ``shared_data`` marker
(tests/conftest.py adds it to every test using the ``shared_dir``, ``scenes_dir`` or,
while the package lacks the large weights, ``weights_dir`` fixtures) and are
deselected when no such folder exists.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.model.weights import bundled_weights_dir, official_sha256

REPO_ROOT = Path(__file__).resolve().parents[1]
DATA_DIR = REPO_ROOT / "tests" / "data"
SCENE_CROPS_DIR = DATA_DIR / "scenes"

SHARED_ENV_VAR = "OIDN_GPU_SHARED"
SHARED_MARKER = "shared_data"

SCENES = ("cornell_diffuse", "cornell_glossy", "textured_checker", "dim_indirect")
OFFICIAL_NAMES = tuple(sorted(official_sha256()))

# What the full-size data set must hold (tests read these files).
_SCENE_FILES = ("color_4spp.exr", "albedo.exr", "normal.exr", "ref.exr", "oidn_4spp_aux.exr")
_EXTRA_SCENE_FILES = {"textured_checker": ("albedo_1spp.exr", "normal_1spp.exr")}


class SharedDataError(Exception):
    """The named full-size data set folder is missing or incomplete."""


# --- weights ---------------------------------------------------------------------------------


def is_bundled(name: str) -> bool:
    """Whether the package ships the official weights file ``name``."""
    return (bundled_weights_dir() / f"{name}.tza").is_file()


def all_official_bundled() -> bool:
    """Whether the package ships all 23 official weights."""
    return all(is_bundled(name) for name in OFFICIAL_NAMES)


def official_param(name: str, *values: object):
    """``pytest.param(name, *values)``, marked ``shared_data`` if the package lacks the
    official weights file ``name`` (the test then reads it from the full-size set)."""
    marks = () if is_bundled(name) else getattr(pytest.mark, SHARED_MARKER)
    return pytest.param(name, *values, marks=marks)


def official_params(names: Iterable[str]) -> list:
    """`official_param` for each weights name."""
    return [official_param(name) for name in names]


# --- scene crops -----------------------------------------------------------------------------


def read_exr(path: Path) -> np.ndarray:
    """The RGB channels of an EXR file as H x W x 3 float32."""
    import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's documented alias

    buf = oiio.ImageBuf(str(path))
    pixels = buf.get_pixels(oiio.FLOAT)
    assert pixels is not None and not buf.has_error, f"cannot read {path}: {buf.geterror()}"
    return np.ascontiguousarray(pixels[:, :, :3], dtype=np.float32)


@functools.cache
def _read_crop(crop: str, image: str) -> np.ndarray:
    path = SCENE_CROPS_DIR / crop / f"{image}.exr"
    assert path.is_file(), f"{path} is missing; regenerate with scripts/make_test_data.py"
    pixels = read_exr(path)
    pixels.flags.writeable = False
    return pixels


def scene_crop(crop: str, images: Iterable[str] = ("color_4spp", "albedo", "normal")) -> dict:
    """Writable copies of the images of one crop in tests/data/scenes.

    ``crop`` is a scene name (a 96 x 112 crop of that scene, images ``color_4spp``,
    ``albedo``, ``normal``, ``ref``) or ``textured_checker_wide`` (88 x 224, with
    ``albedo_1spp`` and ``normal_1spp`` too); tests/data/README.md says where each lies.
    """
    return {image: _read_crop(crop, image).copy() for image in images}


# --- the full-size data set ------------------------------------------------------------------


def _missing_files(path: Path) -> list[str]:
    wanted = [f"weights/{name}.tza" for name in OFFICIAL_NAMES] + ["weights/SHA256SUMS"]
    for scene in SCENES:
        files = _SCENE_FILES + _EXTRA_SCENE_FILES.get(scene, ())
        wanted += [f"testdata/scenes/{scene}/{file}" for file in files]
    return [name for name in wanted if not (path / name).is_file()]


def _check_complete(path: Path, label: str, fix: str) -> Path:
    missing = _missing_files(path)
    if missing:
        shown = ", ".join(missing[:4])
        if len(missing) > 4:
            shown += f" and {len(missing) - 4} more"
        raise SharedDataError(
            f"{label} is not the full-size test data set: missing {shown}; expected "
            "a folder holding weights/ (the 23 official .tza files and SHA256SUMS) and "
            f"testdata/scenes/ ({', '.join(SCENES)}); {fix}"
        )
    return path


def locate_shared_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The full-size data set folder, or None where there is none.

    ``$OIDN_GPU_SHARED`` if set (it must be complete), else ``shared/`` beside the
    checkout if that folder holds ``weights/`` or ``testdata/`` (then it must be
    complete too); a sibling ``shared/`` holding neither is someone else's folder.

    Raises:
        SharedDataError: the folder named or found is missing or incomplete.
    """
    env = environ.get(SHARED_ENV_VAR)
    if env:
        path = Path(env).expanduser().resolve()
        if not path.is_dir():
            raise SharedDataError(
                f"{SHARED_ENV_VAR}={env} is not a folder; expected the full-size test data "
                f"set (weights/ and testdata/scenes/), or unset {SHARED_ENV_VAR}"
            )
        fix = f"unset {SHARED_ENV_VAR} to run without the tests that need it"
        return _check_complete(path, f"{SHARED_ENV_VAR}={env}", fix)
    sibling = REPO_ROOT.parent / "shared"
    if (sibling / "weights").is_dir() or (sibling / "testdata").is_dir():
        fix = f"complete it, or set {SHARED_ENV_VAR} to the full-size data set"
        return _check_complete(sibling.resolve(), f"{sibling} (beside the checkout)", fix)
    return None
