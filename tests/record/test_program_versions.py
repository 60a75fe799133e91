"""Recorded programs in version 2 (oidn-web's layout) and version 3 (checksummed sections).

A version 2 program is walked here word by word as oidn-web's ``serializeProgram``
(``native/program.ts``) writes it, independently of `read_program`: version word 2, no
checksum anywhere, oidn-web's META version 1 as the last bytes. It replays to the version 3
program's image, and `read_program` reads both (GPU: lavapipe).
"""

from __future__ import annotations

import dataclasses
import struct

import numpy as np
import pytest

from oidn_gpu.record import make_config, read_program
from oidn_gpu.record.api import record_denoise, record_network
from oidn_gpu.record.format import META_MAGIC, PROGRAM_MAGIC
from oidn_gpu.record.replay import Replayer
from oidn_gpu.record.summary import describe

from .test_cli_record import run

pytestmark = pytest.mark.gpu


class _Words:
    """A cursor over little-endian u32 words; blobs are padded to 4 bytes."""

    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def u32(self) -> int:
        (value,) = struct.unpack_from("<I", self.data, self.at)
        self.at += 4
        return int(value)

    def blob(self) -> bytes:
        n = self.u32()
        out = self.data[self.at : self.at + n]
        self.at += n + (-n % 4)
        return out

    def skip(self, count: int) -> None:
        self.at += 4 * count


def _walk_version_2(data: bytes) -> dict:
    """oidn-web's version 2 layout, field by field (program.ts's ``serializeProgram``)."""
    w = _Words(data)
    assert (w.u32(), w.u32()) == (PROGRAM_MAGIC, 2)
    w.skip(w.u32())  # input ids
    w.skip(5)  # output id, external, width, height, channels
    for _ in range(w.u32()):  # buffers: size, usage, data, label
        w.skip(2)
        w.blob()
        w.blob()
    shaders = [w.blob() for _ in range(w.u32())]
    for _ in range(w.u32()):  # pipelines: shader id, entry point
        w.skip(1)
        w.blob()
    for _ in range(w.u32()):  # bind groups: pipeline, group, entries of 4 words
        w.skip(2)
        w.skip(4 * w.u32())
    for _ in range(w.u32()):  # operations
        if w.u32() == 0:  # submit: commands of 6 words (kind and 5)
            w.skip(6 * w.u32())
        else:  # write: buffer, offset, data
            w.skip(2)
            w.blob()
    # META version 1: precision, tiles, kernels, frame buffer, weight count, weight ids
    assert (w.u32(), w.u32()) == (META_MAGIC, 1)
    precision, tiles, _, frame = (w.u32() for _ in range(4))
    w.skip(w.u32())
    assert w.at == len(data), "bytes after META version 1"
    return {"shaders": len(shaders), "precision": precision, "tiles": tiles, "frame": frame}


def _rgba(rng: np.random.Generator, h: int, w: int) -> np.ndarray:
    rgb = rng.random((h, w, 3), np.float32) * np.float32(4.0)
    return np.dstack([rgb, rng.random((h, w, 1), np.float32)]).astype(np.float32)


@pytest.mark.parametrize("accumulation", [None, "f16-partials"])
def test_version_2_program_is_oidn_webs_layout_and_replays_to_version_3s_image(
    gpu, tiny_tza, rng, accumulation
):
    if not gpu.capabilities.has_f16:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")
    h, w = 40, 24
    tza = tiny_tza["tiny_base_ic9"]
    config = make_config(w, h, precision="fp16", device=gpu, denoise=True, hdr=True)
    v3 = record_denoise(tza, config, accumulation=accumulation)
    v2 = record_denoise(tza, config, accumulation=accumulation, format_version=2)
    walked = _walk_version_2(v2)
    new, old = read_program(v3), read_program(v2)
    assert walked == {
        "shaders": len(new.shaders),
        "precision": 2,
        "tiles": new.meta.tiles,
        "frame": new.meta.frame_buffer,
    }
    # the same program; version 2 has no checksums (7 sections) and no accumulation words
    assert old == dataclasses.replace(new, meta=dataclasses.replace(new.meta, accumulation=None))
    assert len(v3) == len(v2) + 7 * 4 + 3 * 4
    assert "accumulation: not recorded (META version 1)" in describe(old)
    images = [_rgba(rng, h, w) for _ in range(3)]
    with Replayer(v2, gpu) as replayer:
        replayed_v2 = replayer.run(images, input_scale=0.3)
    with Replayer(v3, gpu) as replayer:
        replayed_v3 = replayer.run(images, input_scale=0.3)
    assert replayed_v2.tobytes() == replayed_v3.tobytes()
    assert np.isfinite(replayed_v2).all()


def test_network_program_in_version_2(tiny_tza):
    config = make_config(16, 16, precision="fp32")
    v2 = record_network(tiny_tza["tiny_base_ic3"], config, format_version=2)
    assert _walk_version_2(v2)["tiles"] == 0
    assert read_program(v2).meta.accumulation is None


def test_cli_records_the_sums_and_the_version(tmp_path, capsys, gpu):
    from .conftest import DATA

    if not gpu.capabilities.has_f16:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")
    weights = str(DATA / "tiny_base_ic3.tza")
    common = ["--weights", weights, "--size", "24x20", "--hdr", "--precision", "fp16"]
    partials, v2 = tmp_path / "partials.oidnp", tmp_path / "v2.oidnp"
    assert run(["record", *common, "--accumulation", "f16-partials", "-o", str(partials)]) == 0
    assert run(["record", *common, "--format-version", "2", "-o", str(v2)]) == 0
    capsys.readouterr()
    assert run(["program", "info", str(partials)]) == 0
    assert "\naccumulation: f16-partials\n" in capsys.readouterr().out
    assert struct.unpack_from("<I", v2.read_bytes(), 4) == (2,)
    _walk_version_2(v2.read_bytes())
    assert run(["program", "info", str(v2)]) == 0
    assert "\naccumulation: not recorded (META version 1)\n" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run(["record", *common, "--format-version", "4", "-o", str(tmp_path / "x.oidnp")])
