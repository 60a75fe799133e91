"""Write the scene crops in tests/data/scenes from the full-size Mitsuba test scenes.

Usage: ``python scripts/make_test_data.py [SHARED]`` where SHARED is the folder
holding ``testdata/scenes/`` (default: ``$OIDN_GPU_SHARED``, else ``../shared``
beside the checkout). Each crop keeps the scene's float32 values exactly
(ZIP-compressed OpenEXR, lossless), so tests on a crop see the renderer's
pixels; the crop's place in the scene is stored in the file's
``ImageDescription``. Running it again rewrites identical pixels.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import OpenImageIO as oiio  # noqa: N813 - OpenImageIO's documented alias

REPO_ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = REPO_ROOT / "tests" / "data" / "scenes"

# Images of each scene folder that the tests read (see tests/data/README.md).
MAIN_IMAGES = ("color_4spp", "albedo", "normal", "ref")
WIDE_IMAGES = ("color_4spp", "albedo", "normal", "albedo_1spp", "normal_1spp")


@dataclass(frozen=True)
class Crop:
    """Rows [y, y + height) and columns [x, x + width) of ``scene``, written as ``name``."""

    name: str
    scene: str
    y: int
    x: int
    height: int
    width: int
    images: tuple[str, ...]


# The main crop of every scene (96 x 112 px, lit walls, edges and objects) and, for the command
# line tests, a wider strip of textured_checker (box edge, sphere and checker floor) with its
# 1-spp aux images.
CROPS = (
    *(
        Crop(scene, scene, 200, 150, 96, 112, MAIN_IMAGES)
        for scene in ("cornell_diffuse", "cornell_glossy", "textured_checker", "dim_indirect")
    ),
    Crop("textured_checker_wide", "textured_checker", 300, 260, 88, 224, WIDE_IMAGES),
)


def shared_dir(argv: list[str]) -> Path:
    if len(argv) > 1:
        return Path(argv[1])
    env = os.environ.get("OIDN_GPU_SHARED")
    return Path(env) if env else REPO_ROOT.parent / "shared"


def read_rgb(path: Path) -> np.ndarray:
    buf = oiio.ImageBuf(str(path))
    pixels = buf.get_pixels(oiio.FLOAT)
    if pixels is None or buf.has_error:
        raise SystemExit(f"error: cannot read {path}: {buf.geterror()}")
    return np.ascontiguousarray(pixels[:, :, :3], dtype=np.float32)


def write_crop(path: Path, pixels: np.ndarray, description: str) -> None:
    spec = oiio.ImageSpec(pixels.shape[1], pixels.shape[0], 3, oiio.FLOAT)
    spec.channelnames = ("R", "G", "B")
    spec.attribute("compression", "zip")
    spec.attribute("ImageDescription", description)
    out = oiio.ImageOutput.create(str(path))
    if out is None or not out.open(str(path), spec):
        raise SystemExit(f"error: cannot write {path}: {oiio.geterror()}")
    ok = out.write_image(pixels)
    out.close()
    if not ok:
        raise SystemExit(f"error: cannot write {path}: {out.geterror()}")


def main(argv: list[str]) -> int:
    scenes = shared_dir(argv) / "testdata" / "scenes"
    if not scenes.is_dir():
        raise SystemExit(f"error: no scenes at {scenes}; pass the shared data folder")
    for crop in CROPS:
        folder = OUT_DIR / crop.name
        folder.mkdir(parents=True, exist_ok=True)
        for image in crop.images:
            full = read_rgb(scenes / crop.scene / f"{image}.exr")
            rows = slice(crop.y, crop.y + crop.height)
            cols = slice(crop.x, crop.x + crop.width)
            pixels = np.ascontiguousarray(full[rows, cols])
            if pixels.shape[:2] != (crop.height, crop.width):
                raise SystemExit(f"error: {crop.scene}/{image}.exr is too small for {crop}")
            description = (
                f"{crop.scene}/{image}.exr rows {crop.y}:{crop.y + crop.height} "
                f"columns {crop.x}:{crop.x + crop.width} (Mitsuba 3 render)"
            )
            write_crop(folder / f"{image}.exr", pixels, description)
    total = sum(p.stat().st_size for p in OUT_DIR.rglob("*.exr"))
    print(f"wrote {OUT_DIR} ({total / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
