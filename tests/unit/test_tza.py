"""Tests of model/tza.py: the official files, the writer, and malformed blobs."""

from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oidn_gpu.errors import InvalidArgumentError, WeightsFormatError
from oidn_gpu.model.tza import (
    ALIGNMENT_BYTES,
    HEADER_BYTE_SIZE,
    MAGIC,
    parse_tza,
    read_tza,
    write_tza,
)
from tests.datasets import official_params

# The 23 official files (section 2.4 of oidn-semantics.md).
OFFICIAL_NAMES = [
    "rt_alb",
    "rt_alb_large",
    "rt_hdr",
    "rt_hdr_alb",
    "rt_hdr_alb_nrm",
    "rt_hdr_alb_nrm_small",
    "rt_hdr_alb_small",
    "rt_hdr_calb_cnrm",
    "rt_hdr_calb_cnrm_large",
    "rt_hdr_calb_cnrm_small",
    "rt_hdr_small",
    "rt_ldr",
    "rt_ldr_alb",
    "rt_ldr_alb_nrm",
    "rt_ldr_alb_nrm_small",
    "rt_ldr_alb_small",
    "rt_ldr_calb_cnrm",
    "rt_ldr_calb_cnrm_small",
    "rt_ldr_small",
    "rt_nrm",
    "rt_nrm_large",
    "rtlightmap_dir",
    "rtlightmap_hdr",
]


def _small_tensors() -> dict[str, np.ndarray]:
    return {
        "a.weight": np.arange(2 * 1 * 3 * 3, dtype=np.float16).reshape(2, 1, 3, 3),
        "a.bias": np.array([0.5, -1.0], np.float16),
        "b.weight": np.linspace(-1, 1, 1 * 2 * 3 * 3, dtype=np.float32).reshape(1, 2, 3, 3),
        "b.bias": np.array([3.25], np.float32),
    }


@pytest.fixture(scope="module")
def small_blob() -> bytes:
    return write_tza(_small_tensors())


@dataclass(frozen=True)
class RecordOffsets:
    """Byte offsets of one table record's fields, for patching blobs in tests."""

    name_length: int
    name: int
    ndims: int
    dims: int
    layout: int
    dtype: int
    data_offset: int


def _table_offset(blob: bytes) -> int:
    return struct.unpack_from("<Q", blob, 4)[0]


def _records(blob: bytes) -> list[RecordOffsets]:
    pos = _table_offset(blob)
    (count,) = struct.unpack_from("<I", blob, pos)
    pos += 4
    out = []
    for _ in range(count):
        (name_length,) = struct.unpack_from("<H", blob, pos)
        ndims = blob[pos + 2 + name_length]
        name_at = pos + 2
        ndims_at = name_at + name_length
        dims_at = ndims_at + 1
        layout_at = dims_at + 4 * ndims
        dtype_at = layout_at + ndims
        offset_at = dtype_at + 1
        out.append(RecordOffsets(pos, name_at, ndims_at, dims_at, layout_at, dtype_at, offset_at))
        pos = offset_at + 8
    return out


def _patch(blob: bytes, offset: int, new: bytes) -> bytes:
    return blob[:offset] + new + blob[offset + len(new) :]


def _expect(blob: bytes, *fragments: str) -> WeightsFormatError:
    with pytest.raises(WeightsFormatError) as err:
        parse_tza(blob)
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)
    return err.value


# --- official files ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", official_params(OFFICIAL_NAMES))
def test_official_file_parses_and_writes_back_byte_identical(name: str, official_weights) -> None:
    blob = official_weights(name).read_bytes()
    tensors = parse_tza(blob)
    assert len(tensors) == (38 if name.endswith("_large") else 32)
    assert all(t.dtype == np.float16 for t in tensors.values())
    assert all(t.ndim == (4 if k.endswith(".weight") else 1) for k, t in tensors.items())
    assert write_tza(tensors) == blob


def test_all_23_official_files_are_covered(weights_dir: Path) -> None:
    assert sorted(p.stem for p in weights_dir.glob("*.tza")) == OFFICIAL_NAMES


def test_official_file_layout_matches_the_writer_conventions(package_weights_dir: Path) -> None:
    blob = (package_weights_dir / "rt_ldr_small.tza").read_bytes()
    assert struct.unpack_from("<HBB", blob, 0) == (MAGIC, 2, 0)
    assert _table_offset(blob) % ALIGNMENT_BYTES == 0
    offsets = [struct.unpack_from("<Q", blob, r.data_offset)[0] for r in _records(blob)]
    assert offsets[0] == 64
    assert all(o % ALIGNMENT_BYTES == 0 for o in offsets)
    assert offsets == sorted(offsets)


def test_read_tza_reads_a_file(tmp_path: Path, small_blob: bytes) -> None:
    path = tmp_path / "x.tza"
    path.write_bytes(small_blob)
    assert list(read_tza(path)) == list(_small_tensors())


# --- the writer and reader on small blobs -----------------------------------------------------


def test_round_trip_keeps_names_order_dtypes_shapes_and_values(small_blob: bytes) -> None:
    tensors = parse_tza(small_blob)
    original = _small_tensors()
    assert list(tensors) == list(original)
    for name, array in original.items():
        assert tensors[name].dtype == array.dtype
        np.testing.assert_array_equal(tensors[name], array)


def test_writer_aligns_data_and_table_to_64_bytes(small_blob: bytes) -> None:
    assert _table_offset(small_blob) % 64 == 0
    for record in _records(small_blob):
        assert struct.unpack_from("<Q", small_blob, record.data_offset)[0] % 64 == 0
    assert small_blob[HEADER_BYTE_SIZE:64] == bytes(64 - HEADER_BYTE_SIZE)


def test_writer_records_the_minor_version_and_reader_ignores_it() -> None:
    blob = write_tza(_small_tensors(), minor=7)
    assert blob[3] == 7
    assert list(parse_tza(blob)) == list(_small_tensors())


def test_empty_archive_round_trips() -> None:
    blob = write_tza({})
    assert len(blob) == 64 + 4
    assert parse_tza(blob) == {}


def test_parsed_arrays_are_read_only(small_blob: bytes) -> None:
    tensor = parse_tza(small_blob)["a.weight"]
    with pytest.raises(ValueError):
        tensor[0, 0, 0, 0] = 1


def test_bytearray_input_is_copied_so_later_writes_do_not_leak(small_blob: bytes) -> None:
    buffer = bytearray(small_blob)
    tensors = parse_tza(memoryview(buffer))
    before = tensors["a.bias"].copy()
    buffer[64:128] = bytes(64)
    np.testing.assert_array_equal(tensors["a.bias"], before)
    assert not tensors["a.bias"].flags.writeable


def test_writer_rejects_unsupported_rank_dtype_and_names() -> None:
    with pytest.raises(InvalidArgumentError, match="'m' has 2 dimensions"):
        write_tza({"m": np.zeros((2, 2), np.float16)})
    with pytest.raises(InvalidArgumentError, match="dtype float64"):
        write_tza({"m": np.zeros(2, np.float64)})
    with pytest.raises(InvalidArgumentError, match="tensor name ''"):
        write_tza({"": np.zeros(2, np.float16)})
    with pytest.raises(InvalidArgumentError, match="minor version 256"):
        write_tza({}, minor=256)


def test_non_bytes_input_is_an_invalid_argument() -> None:
    with pytest.raises(InvalidArgumentError, match="not str"):
        parse_tza("abc")  # type: ignore[arg-type]


# --- malformed headers ------------------------------------------------------------------------


def test_every_truncation_is_a_weights_format_error(small_blob: bytes) -> None:
    for length in range(len(small_blob)):
        with pytest.raises(WeightsFormatError, match="invalid or corrupted weights blob"):
            parse_tza(small_blob[:length])


def test_wrong_magic_is_rejected(small_blob: bytes) -> None:
    _expect(
        _patch(small_blob, 0, b"PK"),
        "invalid or corrupted weights blob",
        "magic number 0x4B50 at byte offset 0",
    )


@pytest.mark.parametrize("major", [0, 1, 3, 255])
def test_other_major_versions_are_unsupported(small_blob: bytes, major: int) -> None:
    _expect(
        _patch(small_blob, 2, bytes([major])),
        "unsupported weights blob version",
        f"major version {major} at byte offset 2",
    )


@pytest.mark.parametrize("table_offset", [0, 11, 10**6, 2**64 - 1])
def test_table_offset_outside_the_blob_is_rejected(small_blob: bytes, table_offset: int) -> None:
    _expect(
        _patch(small_blob, 4, struct.pack("<Q", table_offset)),
        "invalid or corrupted weights blob",
        f"table offset {table_offset} at byte offset 4",
    )


def test_table_offset_just_before_the_end_reports_the_short_count(small_blob: bytes) -> None:
    _expect(
        _patch(small_blob, 4, struct.pack("<Q", len(small_blob) - 2)),
        f"tensor count at byte offset {len(small_blob) - 2} needs 4 bytes",
    )


def test_huge_tensor_count_is_rejected_before_reading(small_blob: bytes) -> None:
    table = _table_offset(small_blob)
    _expect(
        _patch(small_blob, table, struct.pack("<I", 0xFFFFFFFF)),
        f"tensor count 4294967295 at byte offset {table}",
    )


def test_tensor_count_one_too_many_is_a_truncation(small_blob: bytes) -> None:
    blob = small_blob + bytes(40)  # room for the count check, not for a fifth record
    table = _table_offset(blob)
    _expect(_patch(blob, table, struct.pack("<I", 5)), "invalid or corrupted weights blob")


# --- malformed records ------------------------------------------------------------------------


def test_name_length_beyond_the_file_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[-1]
    _expect(
        _patch(small_blob, record.name_length, struct.pack("<H", 0xFFFF)),
        "invalid or corrupted weights blob",
        f"the 65535-byte name of tensor #3 at byte offset {record.name}",
    )


def test_empty_name_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    _expect(
        _patch(small_blob, record.name_length, struct.pack("<H", 0)),
        f"tensor #0 at byte offset {record.name_length} has an empty name",
    )


def test_non_utf8_name_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    _expect(_patch(small_blob, record.name, b"\xff"), "is not UTF-8")


def test_unknown_layout_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    _expect(
        _patch(small_blob, record.layout, b"ohwi"),
        "invalid tensor layout",
        f"tensor 'a.weight' at byte offset {record.layout} has layout b'ohwi'",
    )


def test_one_dimensional_layout_must_be_x(small_blob: bytes) -> None:
    record = _records(small_blob)[1]
    _expect(_patch(small_blob, record.layout, b"o"), "invalid tensor layout", "expected 'x'")


@pytest.mark.parametrize("ndims", [0, 2, 3, 5, 255])
def test_ndims_other_than_1_or_4_is_an_invalid_layout(small_blob: bytes, ndims: int) -> None:
    record = _records(small_blob)[0]
    _expect(
        _patch(small_blob, record.ndims, bytes([ndims])),
        "invalid tensor layout",
        f"has {ndims} dimensions",
    )


def test_ndims_not_matching_the_layout_length_is_rejected(small_blob: bytes) -> None:
    # a 1-D record relabelled as 4-D: its 'x' layout can no longer be 'oihw'
    record = _records(small_blob)[1]
    with pytest.raises(WeightsFormatError):
        parse_tza(_patch(small_blob, record.ndims, bytes([4])))


@pytest.mark.parametrize("dtype_char", [b"b", b"B", b"d", b"\x00"])
def test_unknown_dtype_is_rejected(small_blob: bytes, dtype_char: bytes) -> None:
    record = _records(small_blob)[0]
    _expect(
        _patch(small_blob, record.dtype, dtype_char),
        "invalid tensor data type",
        f"tensor 'a.weight' at byte offset {record.dtype} has data type {dtype_char.decode()!r}",
    )


def test_int8_tensors_written_like_the_training_exporter_are_rejected() -> None:
    blob = write_tza({"q": np.zeros(4, np.int8)})
    _expect(blob, "invalid tensor data type", "'b'")


def test_oversized_dims_are_rejected_without_allocating(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    huge = struct.pack("<4I", *([0xFFFFFFFF] * 4))
    error = _expect(
        _patch(small_blob, record.dims, huge),
        "invalid or corrupted weights blob",
        "tensor 'a.weight' (dims (4294967295, 4294967295, 4294967295, 4294967295), float16)",
    )
    assert "outside bytes" in str(error)


@pytest.mark.parametrize("data_offset", [0, 8, 2**63, 2**64 - 1])
def test_data_offset_out_of_range_is_rejected(small_blob: bytes, data_offset: int) -> None:
    record = _records(small_blob)[2]
    _expect(
        _patch(small_blob, record.data_offset, struct.pack("<Q", data_offset)),
        "invalid or corrupted weights blob",
        f"has data at bytes {data_offset}..",
    )


def test_data_running_past_the_end_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    _expect(
        _patch(small_blob, record.data_offset, struct.pack("<Q", len(small_blob) - 10)),
        "invalid or corrupted weights blob",
    )


def test_data_overlapping_the_table_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[1]
    table = _table_offset(small_blob)
    _expect(
        _patch(small_blob, record.data_offset, struct.pack("<Q", table - 2)),
        "overlapping the table",
    )


def test_data_overlapping_another_tensor_is_rejected(small_blob: bytes) -> None:
    records = _records(small_blob)
    start = struct.unpack_from("<Q", small_blob, records[0].data_offset)[0]
    _expect(
        _patch(small_blob, records[1].data_offset, struct.pack("<Q", start + 2)),
        "the data of tensor 'a.bias'",
        "overlaps that of tensor 'a.weight'",
    )


def test_duplicate_tensor_names_are_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[2]  # 'b.weight' -> 'a.weight'
    _expect(_patch(small_blob, record.name, b"a"), "tensor name 'a.weight'", "appears twice")


def test_trailing_bytes_after_the_table_are_ignored(small_blob: bytes) -> None:
    assert list(parse_tza(small_blob + bytes(100))) == list(_small_tensors())


# --- fuzzing ----------------------------------------------------------------------------------

_FUZZ_SEED_BLOB = write_tza(_small_tensors())


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    flips=st.lists(
        st.tuples(st.integers(0, len(_FUZZ_SEED_BLOB) - 1), st.integers(1, 255)),
        min_size=1,
        max_size=6,
    )
)
def test_random_byte_flips_raise_only_weights_format_errors(flips: list[tuple[int, int]]) -> None:
    blob = bytearray(_FUZZ_SEED_BLOB)
    for offset, mask in flips:
        blob[offset] ^= mask
    try:
        tensors = parse_tza(bytes(blob))
    except WeightsFormatError:
        return
    for tensor in tensors.values():
        assert tensor.dtype in (np.float16, np.float32)


@settings(max_examples=200, deadline=None)
@given(
    table_flips=st.lists(
        st.tuples(st.integers(0, 200), st.integers(0, 255)), min_size=1, max_size=8
    )
)
def test_random_table_bytes_raise_only_weights_format_errors(
    table_flips: list[tuple[int, int]],
) -> None:
    blob = bytearray(_FUZZ_SEED_BLOB)
    table = _table_offset(_FUZZ_SEED_BLOB)
    for offset, value in table_flips:
        position = table + offset % (len(blob) - table)
        blob[position] = value
    with contextlib.suppress(WeightsFormatError):
        parse_tza(bytes(blob))


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=256))
def test_arbitrary_bytes_raise_only_weights_format_errors(data: bytes) -> None:
    with contextlib.suppress(WeightsFormatError):
        parse_tza(data)


@settings(max_examples=200, deadline=None)
@given(
    header=st.tuples(st.integers(0, 255), st.integers(0, 2**64 - 1)),
    tail=st.binary(max_size=64),
)
def test_valid_magic_with_random_version_and_table_raises_only_format_errors(
    header: tuple[int, int], tail: bytes
) -> None:
    major, table_offset = header
    blob = struct.pack("<HBBQ", MAGIC, major, 0, table_offset) + tail
    with contextlib.suppress(WeightsFormatError):
        parse_tza(blob)


def test_zero_size_tensor_with_huge_dims_is_rejected(small_blob: bytes) -> None:
    record = _records(small_blob)[0]
    dims = struct.pack("<4I", 0, *([0xFFFFFFFF] * 3))
    _expect(
        _patch(small_blob, record.dims, dims),
        "invalid or corrupted weights blob",
        f"tensor 'a.weight' at byte offset {record.dims} has dims "
        "(0, 4294967295, 4294967295, 4294967295)",
        "expected every dimension to be at least 1",
    )


# Dimensions at the edges: empty, one, small, and the sizes where a count or a byte size
# overflows 32 or 64 bits or NumPy's limits.
_EDGE_DIMS = st.sampled_from([0, 1, 2, 3, 2**16, 2**31 - 1, 2**31, 2**32 - 1]) | st.integers(
    0, 2**32 - 1
)


def _one_tensor_blob(
    ndims: int, dims: list[int], layout: bytes, dtype_char: bytes, data_offset: int, data: bytes
) -> bytes:
    """A blob holding ``data`` at byte 64 and a one-record table, fields as given."""
    body = bytearray(64) + data
    body += bytes(-len(body) % ALIGNMENT_BYTES)
    table = struct.pack("<IH", 1, 1) + b"t" + struct.pack(f"<B{len(dims)}I", ndims, *dims)
    table += layout + dtype_char + struct.pack("<Q", data_offset)
    body[0:HEADER_BYTE_SIZE] = struct.pack("<HBBQ", MAGIC, 2, 0, len(body))
    return bytes(body + table)


@settings(max_examples=300, deadline=None)
@given(
    ndims=st.sampled_from([1, 4]) | st.integers(0, 8),
    dims=st.lists(_EDGE_DIMS, min_size=0, max_size=8),
    dtype_char=st.sampled_from([b"h", b"f"]) | st.binary(min_size=1, max_size=1),
    data_offset=st.sampled_from([0, 12, 64, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1),
    data_byte_size=st.integers(0, 256),
)
def test_any_dims_dtype_and_data_offset_give_a_tensor_or_a_weights_format_error(
    ndims: int, dims: list[int], dtype_char: bytes, data_offset: int, data_byte_size: int
) -> None:
    layout = {1: b"x", 4: b"oihw"}.get(ndims, b"x" * min(ndims, 8))
    dims = (dims + [1] * ndims)[:ndims]
    blob = _one_tensor_blob(ndims, dims, layout, dtype_char, data_offset, bytes(data_byte_size))
    try:
        tensors = parse_tza(blob)
    except WeightsFormatError:
        return
    # accepted: then it is a real, in-bounds tensor of the declared shape
    tensor = tensors["t"]
    assert tensor.shape == tuple(dims) and 0 not in dims
    assert tensor.dtype == {b"h": np.float16, b"f": np.float32}[dtype_char]
    assert data_offset >= HEADER_BYTE_SIZE
    assert data_offset + tensor.nbytes <= len(blob)
