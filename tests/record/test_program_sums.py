"""Recorded programs that sum fp16 products as asked (``accumulation``), and say so.

A program recorded with ``accumulation="f16-partials"`` (oidn-web's arithmetic) replays
to the live wgpu `Denoiser` with the same accumulation bit for bit, and to another image
than the default program (every product summed in f32); META records the sums and
``oidn-gpu program info`` names them (GPU: lavapipe).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.kernels.gemm import Accumulation
from oidn_gpu.record import make_config, read_program, write_program
from oidn_gpu.record.api import record_denoise, record_denoise_packet, record_network
from oidn_gpu.record.format import (
    ACCUMULATION_CODES,
    META_VERSION,
    MetaAccumulation,
    ProgramFormatError,
)
from oidn_gpu.record.reader import read_packet_error
from oidn_gpu.record.replay import Replayer
from oidn_gpu.record.summary import describe, summarize
from tests.record.programs import doubling_program

pytestmark = pytest.mark.gpu

H, W = 40, 24


def _color(rng: np.random.Generator) -> np.ndarray:
    rgb = rng.random((H, W, 3), np.float32) * np.float32(40.0)
    return np.dstack([rgb, rng.random((H, W, 1), np.float32)]).astype(np.float32)


def _hdr_fp16_config(gpu) -> bytes:
    return make_config(W, H, precision="fp16", device=gpu, denoise=True, hdr=True)


def test_accumulation_codes_are_the_wgpu_backends_names():
    assert set(ACCUMULATION_CODES) == {a.value for a in Accumulation}
    assert ACCUMULATION_CODES[0] == "f32"


def test_f16_partials_program_replays_to_the_live_denoiser_bit_for_bit(
    gpu, tiny_tza, rng, monkeypatch
):
    """The program's sums are the live backend's: same image as `Denoiser(precision="fp16",
    accumulation="f16-partials")` at the same input scale, and not the default program's."""
    if not gpu.capabilities.has_f16:
        pytest.fail("the device has no shader-f16; the fp16 tests need it (lavapipe has it)")
    monkeypatch.setenv("OIDN_GPU_SHADER_CHECKS", "1")  # compile as the Replayer does
    from oidn_gpu.filter import Denoiser

    tza = tiny_tza["tiny_base_ic3"]
    color = _color(rng)
    scale = 0.05
    config = _hdr_fp16_config(gpu)
    partials = record_denoise(tza, config, accumulation="f16-partials")
    default = record_denoise(tza, config)
    with Replayer(partials, gpu) as replayer:
        replayed = replayer.run([color], input_scale=scale)
    with Replayer(default, gpu) as replayer:
        replayed_default = replayer.run([color], input_scale=scale)
    options = {"hdr": True, "weights": tza, "backend": "wgpu", "precision": "fp16"}
    with Denoiser(
        input_scale=scale, device=gpu.device, accumulation="f16-partials", **options
    ) as live:
        direct = live.denoise(color=color[:, :, :3].copy())
        assert live.info().precision == "fp16"
    with Denoiser(input_scale=scale, device=gpu.device, **options) as live:
        direct_default = live.denoise(color=color[:, :, :3].copy())
    assert replayed[:, :, :3].tobytes() == np.ascontiguousarray(direct).tobytes()
    assert replayed_default[:, :, :3].tobytes() == np.ascontiguousarray(direct_default).tobytes()
    assert replayed.tobytes() != replayed_default.tobytes()
    assert np.isfinite(replayed).all()


def test_meta_records_the_sums_and_program_info_names_them(tiny_tza):
    """Recorded for WebGPU's baseline limits with shader-f16 (no device involved)."""
    tza = tiny_tza["tiny_base_ic3"]
    fp16 = make_config(16, 16, precision="fp16", features=["shader-f16"])
    fp32 = make_config(16, 16, precision="fp32")
    cases = {
        "f16-partials": record_network(tza, fp16, accumulation="f16-partials"),
        "f16-chains": record_network(tza, fp16, accumulation="f16-chains"),
        "f32": record_network(tza, fp16),  # the default: every product in f32
        "fp32": record_network(tza, fp32, accumulation="f16-partials"),  # fp32 sums in f32
    }
    for name, data in cases.items():
        program = read_program(data)
        expected = "f32" if name == "fp32" else name
        assert program.meta.accumulation == MetaAccumulation(expected, expected, expected)
        assert summarize(program).accumulation == expected
        assert f"\naccumulation: {expected}\n" in describe(program)
        gemms = [s.code for s in program.shaders if "conv_igemm" in s.code.splitlines()[0]]
        asked = "f16-partials" if name == "fp32" else name  # fp32 kernels ignore the option
        assert gemms and all(f"accumulation={asked} " in code for code in gemms)
    assert len({cases[n] for n in ("f16-partials", "f16-chains", "f32")}) == 3


def test_program_info_names_first_and_final_layer_sums_where_they_differ():
    sums = MetaAccumulation("f16-chains", "f32", "f32")
    program = dataclasses.replace(
        doubling_program(),
        meta=dataclasses.replace(doubling_program().meta, accumulation=sums),
    )
    again = read_program(write_program(program))
    assert again.meta.accumulation == sums
    assert "\naccumulation: f16-chains (first layer f32, final layer f32)\n" in describe(again)
    only_final = MetaAccumulation("f16-partials", "f16-partials", "f32")
    assert only_final.describe() == "f16-partials (final layer f32)"


def test_an_unknown_accumulation_code_is_refused_naming_the_word():
    sums = MetaAccumulation("f16-partials", "f32", "f32")
    program = dataclasses.replace(
        doubling_program(), meta=dataclasses.replace(doubling_program().meta, accumulation=sums)
    )
    data = bytearray(write_program(program, version=2))  # no checksums to fix up
    # version 2 files carry META version 1; make it a META version 2 with a bad final word
    meta_at = bytes(data).rindex(b"META")
    data[meta_at + 4] = META_VERSION
    data += (2).to_bytes(4, "little") + (0).to_bytes(4, "little") + (99).to_bytes(4, "little")
    with pytest.raises(ProgramFormatError, match="META final layer accumulation 99"):
        read_program(bytes(data))


def test_unknown_accumulation_and_version_are_refused_before_recording(tiny_tza):
    tza = tiny_tza["tiny_base_ic3"]
    config = make_config(16, 16, precision="fp16", features=["shader-f16"], denoise=True)
    with pytest.raises(InvalidArgumentError, match="unknown accumulation 'f16'"):
        record_denoise(tza, config, accumulation="f16")
    with pytest.raises(InvalidArgumentError, match="format version 4"):
        record_network(tza, make_config(16, 16), format_version=4)
    message = read_packet_error(record_denoise_packet(tza, config, accumulation="half"))
    assert "unknown accumulation 'half'" in message
    with pytest.raises(InvalidArgumentError, match="unknown layers accumulation"):
        MetaAccumulation("half")
