"""The program reader under hostile input: only `ProgramFormatError`, no crash or big allocation."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oidn_gpu.record.format import (
    OIDN_WEB_PROGRAM_VERSION,
    PROGRAM_MAGIC,
    PROGRAM_VERSION,
    PROGRAM_VERSIONS,
    Program,
    ProgramFormatError,
)
from oidn_gpu.record.reader import read_model_packet, read_program
from oidn_gpu.record.writer import write_program

from .programs import doubling_program

PROGRAM = write_program(doubling_program())
PROGRAM_V2 = write_program(doubling_program(), version=OIDN_WEB_PROGRAM_VERSION)


def parse_or_reject(data: bytes) -> Program | None:
    """Parse ``data``; a rejection must be a `ProgramFormatError` and nothing else."""
    try:
        return read_program(data)
    except ProgramFormatError:
        return None


def test_every_truncation_is_rejected():
    without_meta = len(write_program(doubling_program(meta=False)))
    for length in range(len(PROGRAM)):
        if length == without_meta:  # META is optional: the cut there is a valid program
            assert read_program(PROGRAM[:length]) == doubling_program(meta=False)
            continue
        with pytest.raises(ProgramFormatError):
            read_program(PROGRAM[:length])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.integers(0, len(PROGRAM) - 1), st.integers(0, 255)), min_size=1, max_size=8
    )
)
def test_random_byte_flips_are_rejected_or_parse_to_a_valid_program(flips):
    for version, original in ((PROGRAM_VERSION, PROGRAM), (OIDN_WEB_PROGRAM_VERSION, PROGRAM_V2)):
        data = bytearray(original)
        for index, value in flips:
            data[index % len(data)] = value
        program = parse_or_reject(bytes(data))
        if program is None:
            continue
        # version 2: a flip inside data or a label can still be a valid program; version 3:
        # only a flip that changes nothing (the checksums cover every other byte)
        assert write_program(program, version=version) == bytes(data)
        assert version == OIDN_WEB_PROGRAM_VERSION or bytes(data) == original


@settings(max_examples=200)
@given(st.binary(max_size=512))
def test_random_bytes_are_rejected(data):
    parse_or_reject(data)
    for version in PROGRAM_VERSIONS:
        parse_or_reject(struct.pack("<2I", PROGRAM_MAGIC, version) + data)
    with contextlib.suppress(ProgramFormatError):
        read_model_packet(data)


@pytest.mark.parametrize("word", range(2, 40))
def test_huge_counts_and_lengths_fail_fast_without_allocating(word):
    data = bytearray(PROGRAM)
    struct.pack_into("<I", data, 4 * word, 0xFFFFFFF0)
    tracemalloc.start()
    try:
        parse_or_reject(bytes(data))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * len(PROGRAM) + (1 << 20)


@settings(max_examples=300)
@given(st.integers(0, len(PROGRAM) // 4 - 1), st.integers(0, 0xFFFFFFFF))
def test_any_word_replaced_by_any_value_is_rejected_or_valid(index, value):
    data = bytearray(PROGRAM)
    struct.pack_into("<I", data, 4 * index, value)
    parse_or_reject(bytes(data))


# The header words after the input list: output id, external flag, width, height, channels.
_HEADER_WORD = 3 + len(doubling_program().inputs)
_EDGE_U32 = st.sampled_from([0, 1, 2, 3, 4, 5, 2**16, 2**31, 2**32 - 1]) | st.integers(0, 2**32 - 1)


@settings(max_examples=300, deadline=None)
@given(st.tuples(_EDGE_U32, _EDGE_U32, _EDGE_U32, _EDGE_U32, _EDGE_U32))
def test_any_output_header_is_rejected_or_a_valid_program(words):
    data = bytearray(PROGRAM)
    struct.pack_into("<5I", data, 4 * _HEADER_WORD, *words)
    program = parse_or_reject(bytes(data))
    if program is None:
        return
    output, external, width, height, channels = words
    assert (program.output, program.output_external) == (output, bool(external))
    assert (program.output_width, program.output_height) == (width, height)
    assert width >= 1 and height >= 1 and 1 <= channels <= 4
    assert program.output < len(program.buffers) and program.output not in program.inputs


@pytest.mark.parametrize(("width", "height"), [(0, 4), (4, 0), (0, 0), (0, 2**32 - 1)])
def test_an_empty_output_size_is_rejected(width, height):
    data = bytearray(PROGRAM)
    struct.pack_into("<2I", data, 4 * (_HEADER_WORD + 2), width, height)
    with pytest.raises(ProgramFormatError, match=f"output size {width}x{height} is empty"):
        read_program(bytes(data))
