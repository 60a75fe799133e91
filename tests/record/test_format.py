"""Program writer/reader: round trips, exact layout, validation, packets, config words (no GPU)."""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from pathlib import Path

import pytest

from oidn_gpu.backends.wgpu import kernel_choice
from oidn_gpu.errors import InvalidArgumentError
from oidn_gpu.record.config import (
    KERNELS,
    DenoiseOptions,
    MatrixConfig,
    RecordConfig,
    make_config,
    parse_config,
)
from oidn_gpu.record.format import (
    ERROR_MAGIC,
    META_MAGIC,
    OIDN_WEB_PROGRAM_VERSION,
    PROGRAM_MAGIC,
    PROGRAM_VERSION,
    SECTIONS,
    BindGroupDesc,
    BindingDesc,
    Copy,
    Dispatch,
    ProgramFormatError,
    Submit,
    Write,
)
from oidn_gpu.record.reader import read_model_packet, read_packet_error, read_program
from oidn_gpu.record.summary import describe, summarize
from oidn_gpu.record.writer import error_packet, model_packet, write_program

from .programs import DOUBLE_WGSL, doubling_program

TINY_PROGRAM = Path(__file__).resolve().parents[1] / "data" / "program_tiny.oidnp"
# The same program as oidn-web writes it (version 2, no checksums).
TINY_PROGRAM_V2 = TINY_PROGRAM.with_name("program_tiny_v2.oidnp")


def words(data: bytes, start: int, count: int) -> tuple[int, ...]:
    return struct.unpack_from(f"<{count}I", data, start)


def test_round_trip_gives_the_same_program_and_bytes():
    program = doubling_program()
    data = write_program(program)
    assert read_program(data) == program
    assert write_program(read_program(data)) == data


def test_program_without_meta_round_trips_and_is_shorter():
    with_meta = write_program(doubling_program())
    without = write_program(doubling_program(meta=False))
    assert read_program(without).meta is None
    assert with_meta.startswith(without)
    assert words(with_meta, len(without), 2) == (META_MAGIC, 1)


def test_header_words_follow_seed_004():
    data = write_program(doubling_program(), version=OIDN_WEB_PROGRAM_VERSION)
    # magic, version, input count, input ids, output id, external, width, height, channels
    assert words(data, 0, 9) == (PROGRAM_MAGIC, 2, 1, 0, 1, 1, 4, 4, 4)
    assert data[:4] == b"OIDN"
    # buffer count, then buffer 0: size, usage, data length 0, label "test/input" (10 bytes)
    assert words(data, 36, 5) == (4, 256, 0x88, 0, 10)
    assert data[56:66] == b"test/input" and data[66:68] == b"\0\0"


def test_strings_and_blobs_are_padded_to_four_bytes():
    data = write_program(doubling_program())
    assert len(data) % 4 == 0
    code = DOUBLE_WGSL.encode()
    at = data.index(code)
    assert words(data, at - 4, 1) == (len(code),)
    pad = -len(code) % 4
    assert data[at + len(code) : at + len(code) + pad] == b"\0" * pad


def test_tiny_program_file_matches_the_writer_byte_for_byte():
    """tests/data/program_tiny.oidnp is the doubling program; change it only on purpose."""
    data = write_program(doubling_program())
    assert TINY_PROGRAM.read_bytes() == data, (
        "the program format changed; if deliberate, regenerate tests/data/program_tiny.oidnp "
        "with write_program(tests.record.programs.doubling_program()) and update the docs"
    )


def test_version_2_files_still_read_and_write_byte_for_byte():
    old = TINY_PROGRAM_V2.read_bytes()
    assert words(old, 0, 2) == (PROGRAM_MAGIC, OIDN_WEB_PROGRAM_VERSION)
    assert read_program(old) == doubling_program()
    assert write_program(doubling_program(), version=OIDN_WEB_PROGRAM_VERSION) == old


def test_version_3_follows_every_section_with_its_crc32():
    program = doubling_program()
    old, new = write_program(program, version=OIDN_WEB_PROGRAM_VERSION), write_program(program)
    assert words(new, 0, 2) == (PROGRAM_MAGIC, PROGRAM_VERSION)
    # 7 sections (header, buffers, shaders, pipelines, bind groups, operations, META)
    assert len(new) == len(old) + 7 * 4
    header = bytearray(old[:36])
    header[4] = PROGRAM_VERSION
    assert words(new, 36, 1) == (zlib.crc32(bytes(header)),)
    # META: 7 words and 1 weight buffer id
    assert words(new, len(new) - 4, 1) == (zlib.crc32(old[-4 * 8 :]),)


@pytest.mark.parametrize("section", range(7))
def test_a_wrong_checksum_is_refused_naming_its_section(section):
    data = bytearray(write_program(doubling_program()))
    at = _section_ends(bytes(data))[section]
    data[at] ^= 1
    with pytest.raises(ProgramFormatError, match="the file is corrupt") as info:
        read_program(bytes(data))
    assert f"the {SECTIONS[section]} section" in str(info.value) and info.value.offset == at


def _section_ends(data: bytes) -> list[int]:
    """Byte offsets of the 7 checksums of a version 3 file (found by trying each word)."""
    ends, start = [], 0
    for at in range(4, len(data), 4):
        if len(ends) < 7 and words(data, at, 1) == (zlib.crc32(data[start:at]),):
            ends.append(at)
            start = at + 4
    assert len(ends) == 7
    return ends


def test_zeroed_buffer_data_is_refused_as_corrupt():
    """A version 2 file with zeroed weights reads as a valid program; version 3 refuses it."""
    params = struct.pack("<4I", 64, 0, 0, 0)  # the doubling program's initial data
    for version, refused in ((OIDN_WEB_PROGRAM_VERSION, False), (PROGRAM_VERSION, True)):
        data = write_program(doubling_program(), version=version)
        zeroed = data.replace(params, bytes(len(params)))
        assert zeroed != data
        if not refused:
            assert read_program(zeroed).buffers[2].data == bytes(16)
            continue
        with pytest.raises(ProgramFormatError, match=r"the buffers section .* corrupt"):
            read_program(zeroed)


def test_unknown_write_version_is_an_error():
    with pytest.raises(InvalidArgumentError, match="unknown program version 4"):
        write_program(doubling_program(), version=4)


def _replace(program, **changes):
    return dataclasses.replace(program, **changes)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"inputs": (9,)}, "input 0 refers to buffer 9"),
        ({"inputs": (0, 0)}, "listed twice"),
        ({"output": 0}, "also an input"),
        ({"bind_groups": (BindGroupDesc(3, 0, ()),)}, "refers to pipeline 3"),
        ({"bind_groups": (BindGroupDesc(0, 4, ()),)}, "group index 4"),
        (
            {"bind_groups": (BindGroupDesc(0, 0, (BindingDesc(0, 0), BindingDesc(0, 1))),)},
            "duplicate",
        ),
        ({"bind_groups": (BindGroupDesc(0, 0, (BindingDesc(0, 0, 4, 0),)),)}, "multiple of 256"),
        ({"bind_groups": (BindGroupDesc(0, 0, (BindingDesc(0, 2, 0, 32),)),)}, "exceeds"),
        ({"operations": (Write(0, 2, b"abcd"),)}, "not 4-byte aligned"),
        ({"operations": (Write(3, 0, b"x" * 20),)}, "exceeds"),
        ({"operations": (Write(2, 0, b"x" * 4),)}, "writes buffer 2, whose usage 0x40 lacks"),
        ({"operations": (Submit((Copy(2, 0, 3, 0, 4),)),)}, "usage 0x40 lacks COPY_SRC"),
        ({"operations": (Submit((Copy(3, 0, 2, 0, 4),)),)}, "usage 0x40 lacks COPY_DST"),
        (
            {"bind_groups": (BindGroupDesc(0, 0, (BindingDesc(0, 3),)),)},
            "binds buffer 3, whose usage 0xc lacks UNIFORM or STORAGE",
        ),
        ({"operations": (Submit((Copy(1, 0, 1, 0, 4),)),)}, "onto itself"),
        ({"operations": (Submit((Copy(0, 0, 3, 0, 32),)),)}, "exceeds"),
        ({"operations": (Submit((Dispatch(0, 5, 1, 1, 1),)),)}, "missing pipeline or bind group"),
    ],
)
def test_inconsistent_programs_are_rejected(change, message):
    data = write_program(_replace(doubling_program(), **change))
    with pytest.raises(ProgramFormatError, match=message):
        read_program(data)


def test_dispatch_with_a_bind_group_of_another_pipeline_is_rejected():
    base = doubling_program()
    program = _replace(
        base,
        pipelines=base.pipelines * 2,
        operations=(Submit((Dispatch(1, 0, 1, 1, 1),)),),
    )
    with pytest.raises(ProgramFormatError, match="made for pipeline 0"):
        read_program(write_program(program))


def test_errors_name_the_offset_and_are_invalid_argument_errors():
    data = bytearray(write_program(doubling_program()))
    data[4] = 4  # version
    with pytest.raises(ProgramFormatError) as info:
        read_program(bytes(data))
    assert info.value.offset == 4
    assert "unsupported version 4; expected 2 or 3" in str(info.value)
    assert isinstance(info.value, InvalidArgumentError) and isinstance(info.value, ValueError)


def test_trailing_bytes_and_unknown_extensions_are_rejected():
    data = write_program(doubling_program())
    with pytest.raises(ProgramFormatError, match="unexpected bytes"):
        read_program(data + b"\0\0\0\0")
    bare = write_program(doubling_program(meta=False))
    with pytest.raises(ProgramFormatError, match="unknown extension"):
        read_program(bare + b"XTRA")


def test_nonzero_padding_is_rejected():
    data = bytearray(write_program(doubling_program(), version=OIDN_WEB_PROGRAM_VERSION))
    data[66] = 1  # padding after the label "test/input"
    with pytest.raises(ProgramFormatError, match="padding"):
        read_program(bytes(data))


def test_error_packet_is_recognized_by_the_program_reader():
    packet = error_packet("weights are broken")
    assert words(packet, 0, 2) == (ERROR_MAGIC, 18)
    assert read_packet_error(packet) == "weights are broken"
    assert read_packet_error(write_program(doubling_program())) is None
    with pytest.raises(ProgramFormatError, match="error packet: weights are broken"):
        read_program(packet)


def test_model_packet_layout():
    packet = model_packet(3)
    assert packet == b"MODL" + struct.pack("<2I", 1, 3)
    assert read_model_packet(packet) == 3
    with pytest.raises(ProgramFormatError, match="error packet"):
        read_model_packet(error_packet("no"))


def test_summary_counts_everything():
    s = summarize(doubling_program())
    assert (
        s.kind,
        s.buffer_count,
        s.shader_count,
        s.dispatch_count,
        s.copy_count,
        s.write_count,
    ) == (
        "denoise",
        4,
        1,
        1,
        1,
        1,
    )
    assert s.shader_names == (("double", 1),)
    assert s.weight_bytes == 16
    assert "1 submits (1 dispatches, 1 copies), 1 writes" in describe(doubling_program())


# --- config words -----------------------------------------------------------------------


def test_network_config_words_follow_seed_004():
    data = make_config(
        64,
        32,
        precision="fp16",
        kernel="direct",
        features=["shader-f16", "subgroups"],
        subgroup_min_size=4,
        subgroup_max_size=64,
    )
    w = words(data, 0, len(data) // 4)
    assert w == (1, 64, 32, 2, 2, 3, 16384, 256, 256, 256, 65535, 4, 64, 0, 0, 0, 0)


def test_denoise_config_round_trips():
    config = RecordConfig(
        width=100,
        height=50,
        precision="fp32",
        kernel="implicit-gemm",
        features=frozenset({"shader-f16"}),
        matrix_configs=(MatrixConfig("f16", "f32", 8, 8, 8),),
        double_buffer="on",
        accumulation="f16",
        sub_pixel=False,
        denoise=DenoiseOptions(hdr=True, transfer="log", max_tile_edge=512, input_scale=0.5),
    )
    data = config.to_bytes()
    assert len(data) == 4 * (14 + 5 + 3 + 4)
    assert parse_config(data, denoise=True) == config
    assert words(data, 4 * 25, 1) == (struct.unpack("<I", struct.pack("<f", 0.5))[0],)


def test_input_scale_word_zero_means_one():
    data = make_config(16, 16, denoise=True, hdr=True)
    assert words(data, len(data) - 4, 1) == (0,)
    assert parse_config(data, denoise=True).denoise.input_scale == 1.0


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda w: w.__setitem__(0, 2), "unsupported config version 2"),
        (lambda w: w.__setitem__(1, 0), "width 0"),
        (lambda w: w.__setitem__(13, 65), "word 13 says 65 matrix configurations; at most 64"),
        (lambda w: w.__setitem__(13, 1_000_000), "matrix configurations"),
        (lambda w: w.__delitem__(slice(2, None)), "expected at least 3"),
    ],
)
def test_config_words_that_make_no_safe_program_are_rejected(mutate, message):
    w = list(words(make_config(16, 16), 0, 17))
    mutate(w)
    with pytest.raises(InvalidArgumentError, match=message):
        parse_config(struct.pack(f"<{len(w)}I", *w), denoise=False)


# oidn-webgpu's reader (program.ts, createNativeExecutor / recordDenoise) takes any words:
# an out-of-range choice is its default, unknown feature bits are dropped, absent words
# read as undefined (the default), extra words are ignored.
@pytest.mark.parametrize(
    "mutate, field, value",
    [
        (lambda w: w.__setitem__(3, 3), "precision", "auto"),
        (lambda w: w.__setitem__(4, 9), "kernel", "auto"),
        (lambda w: w.__setitem__(5, 16 | 1), "features", frozenset({"shader-f16"})),
        (lambda w: w.__setitem__(11, 64) or w.__setitem__(12, 4), "subgroup_min_size", 64),
        (lambda w: w.__setitem__(14, 7), "double_buffer", "off"),  # 0 default, 2 on, else off
        (lambda w: w.__setitem__(15, 5), "accumulation", "f32"),  # 1 f16, else f32
        (lambda w: w.__setitem__(16, 2), "sub_pixel", True),  # 1 off, else on
        (lambda w: w.append(0), "width", 16),  # an extra word
        (lambda w: w.__setitem__(13, 1), "matrix_configs", (MatrixConfig("f32", "f32", 0, 0, 0),)),
        (lambda w: w.__delitem__(slice(3, None)), "max_compute_workgroup_size_x", 256),
        (lambda w: w.__delitem__(slice(14, None)), "double_buffer", "off"),  # absent: off
    ],
)
def test_config_words_are_read_as_oidn_webgpu_reads_them(mutate, field, value):
    w = list(words(make_config(16, 16), 0, 17))
    mutate(w)
    config = parse_config(struct.pack(f"<{len(w)}I", *w), denoise=False)
    assert getattr(config, field) == value


def test_a_trailing_partial_word_is_ignored():
    data = make_config(16, 16)
    assert parse_config(data + b"\1\2", denoise=False) == parse_config(data, denoise=False)


# (hdr word, transfer word) -> the curve: oidn-webgpu's `words[next + 1] === 1 ? 'log' : 'pu'`,
# used only with hdr (LDR color gets `sanitize(col.rgb, 0, 1)` and no curve); 2..4 are ours.
SEED_TRANSFERS = {
    (1, 0): "default",  # PU
    (1, 1): "log",
    (1, 2): "linear",
    (1, 3): "srgb",
    (1, 4): "pu",
    (1, 9): "default",  # PU
    (0, 0): "default",  # no curve
    (0, 1): "default",  # no curve: oidn-webgpu ignores the word in LDR
    (0, 2): "linear",
    (0, 3): "srgb",
    (0, 4): "pu",
    (0, 9): "default",
    (7, 1): "default",  # hdr is `=== 1`: 7 is LDR
}


@pytest.mark.parametrize(("hdr", "transfer"), sorted(SEED_TRANSFERS))
def test_transfer_words_keep_oidn_webgpu_meaning(hdr, transfer):
    w = list(words(make_config(16, 16, denoise=True, hdr=True), 0, 21))
    w[17], w[18] = hdr, transfer
    options = parse_config(struct.pack("<21I", *w), denoise=True).denoise
    assert (options.hdr, options.transfer) == (hdr == 1, SEED_TRANSFERS[hdr, transfer])


def test_make_config_writes_oidn_curve_for_ldr_explicitly():
    assert words(make_config(16, 16, denoise=True), 4 * 18, 1) == (3,)  # sRGB
    assert words(make_config(16, 16, denoise=True, hdr=True), 4 * 18, 1) == (0,)  # PU
    with pytest.raises(InvalidArgumentError, match="'log' needs hdr"):
        make_config(16, 16, denoise=True, transfer="log")


def test_config_length_must_hold_version_width_and_height():
    with pytest.raises(InvalidArgumentError, match="0 whole word"):
        parse_config(b"\1\0\0", denoise=False)
    short = parse_config(make_config(16, 16), denoise=True)  # no denoise words: defaults
    assert short.denoise == DenoiseOptions()


@pytest.mark.parametrize("bits", [0x7FC00000, 0x7F800000, 0xBF800000])
def test_an_input_scale_that_is_not_finite_and_positive_is_refused(bits):
    w = list(words(make_config(16, 16, denoise=True, hdr=True), 0, 21))
    w[20] = bits
    with pytest.raises(InvalidArgumentError, match=re.escape("0 means 1 (oidn-webgpu's rule)")):
        parse_config(struct.pack("<21I", *w), denoise=True)


def test_meta_frame_buffer_must_be_a_16_byte_uniform():
    from oidn_gpu.record.format import FRAME_BYTES

    assert FRAME_BYTES == 16
    base = doubling_program()
    ok = _replace(base, meta=_replace(base.meta, frame_buffer=2))  # the 16-byte uniform
    assert read_program(write_program(ok)).meta.frame_buffer == 2
    for frame in (0, 3):  # a storage input, a copy-only scratch buffer
        bad = _replace(base, meta=_replace(base.meta, frame_buffer=frame))
        with pytest.raises(ProgramFormatError, match=r"frame buffer .* UNIFORM buffer of at least"):
            read_program(write_program(bad))


def test_the_config_kernel_words_cover_every_kernel_setting() -> None:
    """The config word keeps its own order (it is part of the format); its names are the
    kernel settings the executor takes, plus subgroup-matrix (recorded, not generated)."""
    assert set(KERNELS) == {*kernel_choice.kernel_names(), "subgroup-matrix"}
