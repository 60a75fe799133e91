"""Motion passes as each renderer writes them, read into the canonical backward motion."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from oidn_gpu.image import aovs, motion
from tests import exr_files

H, W = 6, 8
# The point at every pixel moved 2 px right and 1 px down (towards the bottom of the image)
# since the previous frame, and keeps moving so: its previous position is 2 px left and 1 px
# up, its next one 2 px right and 1 px down. Canonical: x right, y down.
BACKWARD = (-2.0, -1.0)
FORWARD = (2.0, 1.0)


def _file(tmp_path: Path, layers: dict[str, dict[str, float]], *, beauty: bool = True) -> Path:
    """An EXR with an RGB beauty and the given layers' channels, each constant."""
    names: list[str] = []
    values: list[float] = []
    if beauty:
        names += ["R", "G", "B"]
        values += [0.5, 0.5, 0.5]
    for layer, channels in layers.items():
        for channel, value in channels.items():
            names.append(f"{layer}.{channel}")
            values.append(value)
    pixels = np.broadcast_to(np.asarray(values, np.float32), (H, W, len(values)))
    path = tmp_path / "frame.0001.exr"
    exr_files.write_parts(path, [(exr_files.spec(W, H, names, "float"), pixels)])
    return path


# What each renderer writes for that motion (the module docstring's conventions).
RENDERER_FILES = {
    # Cycles: X, Y = previous - here and Z, W = here - next, in pixels with y up.
    "cycles": ({"ViewLayer.Vector": {"X": -2.0, "Y": 1.0, "Z": -2.0, "W": 1.0}}, True),
    # Forward-only, y up: next - here = (2, -1 in y up).
    "arnold": ({"motionvector": {"R": 2.0, "G": -1.0, "B": 0.0}}, False),
    "karma": ({"motionvector": {"X": 2.0, "Y": -1.0}}, False),
    "vray": ({"VRayVelocity": {"R": 2.0, "G": -1.0, "B": 0.3}}, False),
    "redshift": ({"MotionVectors": {"R": 2.0, "G": -1.0, "B": 0.0}}, False),
    # RenderMan: raster y down, previous - here and next - here.
    "renderman": (
        {"motionBack": {"X": -2.0, "Y": -1.0, "Z": 0.0}, "motionFore": {"X": 2.0, "Y": 1.0}},
        True,
    ),
}


@pytest.mark.parametrize("name", sorted(RENDERER_FILES))
def test_each_renderer_convention_reads_to_the_canonical_motion(name: str, tmp_path: Path) -> None:
    layers, has_both = RENDERER_FILES[name]
    path = _file(tmp_path, layers)
    result = motion.read_motion(path, size=(H, W))
    assert result.backward.shape == (H, W, 2) and result.backward.dtype == np.float32
    np.testing.assert_array_equal(result.backward, np.broadcast_to(BACKWARD, (H, W, 2)))
    assert result.forward is not None
    np.testing.assert_array_equal(result.forward, np.broadcast_to(FORWARD, (H, W, 2)))
    assert result.backward_is_estimated == (not has_both)
    assert result.invalid_count == 0
    expected = "arnold" if name == "karma" else name  # one layer name, the same meaning
    assert result.convention.name == expected


def test_cycles_vector_is_the_inverse_of_reading_it() -> None:
    rng = np.random.default_rng(3)
    back, fwd = rng.normal(size=(2, H, W, 2)).astype(np.float32)
    read = motion.convert(motion.cycles_vector(back, fwd), "cycles")
    np.testing.assert_array_equal(read.backward, back)
    np.testing.assert_array_equal(read.forward, fwd)


def test_every_renderer_motion_name_is_looked_for() -> None:
    folded = {n.casefold() for n in aovs.MOTION_LAYER_NAMES}
    for entry in aovs.RENDERER_AOVS:
        for name in entry.motion:
            if name != "motionFore":  # read with motionBack
                assert name.casefold() in folded, (entry.renderer, name)


def test_the_docs_list_every_motion_name_and_convention() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "aovs.md").read_text()
    for entry in aovs.RENDERER_AOVS:
        for name in entry.motion:
            assert f"`{name}`" in docs, (entry.renderer, name)
    for key in motion.CONVENTIONS:
        assert f"`{key}`" in docs, key


def test_a_named_layer_wins_and_its_convention_can_be_given(tmp_path: Path) -> None:
    path = _file(
        tmp_path,
        {
            "ViewLayer.Vector": {"X": 1.0, "Y": 1.0, "Z": 1.0, "W": 1.0},
            "mv": {"X": -2.0, "Y": -1.0},
        },
    )
    assert motion.read_motion(path).layer == "ViewLayer.Vector"
    named = motion.read_motion(path, "mv", convention="pixels")
    np.testing.assert_array_equal(named.backward, np.broadcast_to(BACKWARD, (H, W, 2)))
    assert named.forward is None
    with pytest.raises(motion.MotionPassError, match=r"motion layer 'mv' .* name its convention"):
        motion.read_motion(path, "mv")
    with pytest.raises(motion.MotionPassError, match=r"has no layer 'nope' \(motion layer\)"):
        motion.read_motion(path, "nope")
    with pytest.raises(motion.MotionPassError, match=r"unknown motion convention 'blender'"):
        motion.read_motion(path, "mv", convention="blender")


def test_a_file_without_motion_says_what_was_looked_for(tmp_path: Path) -> None:
    path = _file(tmp_path, {"albedo": {"R": 0.1, "G": 0.2, "B": 0.3}})
    assert motion.find_motion_pass(path) is None
    with pytest.raises(motion.MotionPassError) as error:
        motion.read_motion(path)
    message = str(error.value)
    assert "has no motion pass: looked for Vector, motionvector" in message
    assert "albedo: R, G, B" in message and "--motion-layer" in message


def test_wrong_channels_and_size_are_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, {"ViewLayer.Vector": {"X": 0.0, "Y": 0.0}})
    with pytest.raises(motion.MotionPassError) as error:
        motion.read_motion(path)
    assert "'ViewLayer.Vector'" in str(error.value)
    assert "has channels X, Y; expected Blender Cycles: 4 channels" in str(error.value)
    good = _file(tmp_path, {"VRayVelocity": {"R": 0.0, "G": 0.0, "B": 0.0}})
    with pytest.raises(motion.MotionPassError, match=r"is 8x6 pixels but the color is 16x16"):
        motion.read_motion(good, size=(16, 16))
    with pytest.raises(motion.MotionPassError, match=r"expected H x W x 4"):
        motion.convert(np.zeros((H, W, 2)), "cycles")


def test_non_finite_vectors_are_masked_and_zeroed() -> None:
    values = np.zeros((H, W, 4), np.float32)
    values[1, 2, 0] = np.nan
    values[3, 4, 3] = np.inf
    values[5, 7, 1] = -np.inf
    result = motion.convert(values, "cycles")
    expected = np.zeros((H, W), bool)
    expected[1, 2] = expected[3, 4] = expected[5, 7] = True
    np.testing.assert_array_equal(result.invalid, expected)
    assert np.isfinite(result.backward).all() and np.isfinite(result.forward).all()
    assert not result.backward[expected].any()


def test_renderman_backward_motion_alone_has_no_forward(tmp_path: Path) -> None:
    path = _file(tmp_path, {"motionBack": {"X": -2.0, "Y": -1.0, "Z": 0.0}})
    result = motion.read_motion(path)
    np.testing.assert_array_equal(result.backward, np.broadcast_to(BACKWARD, (H, W, 2)))
    assert result.forward is None and not result.backward_is_estimated
    assert result.layer == "motionBack"
