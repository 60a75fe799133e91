"""The TZA weight container: bytes -> ``{name: ndarray}`` and back.

TZA is OIDN's tensor archive (reader ``core/tza.cpp``, writer
``training/tza.py`` in the OIDN sources; layout in section 1 of
``oidn-semantics.md``). All integers are little-endian::

    offset 0   u16  magic 0x41D7
    offset 2   u8   major version (must be 2)
    offset 3   u8   minor version (ignored)
    offset 4   u64  absolute byte offset of the tensor table
    ...             tensor data, each block starting at a multiple of 64
    table      u32  tensor count, then per tensor:
                    u16 name length, name bytes (UTF-8), u8 ndims,
                    ndims x u32 dims, ndims layout chars ('x' or 'oihw'),
                    1 dtype char ('h' float16, 'f' float32), u64 data offset

`parse_tza` checks every read against the end of the blob before it happens,
so a malformed blob raises `WeightsFormatError` (never ``IndexError``,
``struct.error``, a hang or a huge allocation). Each message starts with OIDN's
verbatim message for the condition and names the byte offset and the reason.

The arrays returned are read-only, zero-copy views of an immutable ``bytes``
object (a ``bytearray`` or writable ``memoryview`` is copied once first, so
later writes to it cannot change the weights).

`write_tza` produces byte-identical files to the official exporter; the tests
use it to make tiny and deliberately malformed blobs.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Mapping
from itertools import pairwise
from pathlib import Path

import numpy as np

from oidn_gpu.errors import InvalidArgumentError, WeightsFormatError

MAGIC = 0x41D7
"""The u16 at offset 0 of every TZA blob (bytes ``D7 41``)."""

MAJOR_VERSION = 2
"""The only major version OIDN 2.x reads."""

ALIGNMENT_BYTES = 64
"""The writer pads tensor data and the table to multiples of this (``training/tza.py``)."""

HEADER_BYTE_SIZE = 12
"""magic u16 + major u8 + minor u8 + table offset u64."""

# OIDN's verbatim messages (core/tza.cpp), each the start of our message.
MSG_CORRUPTED = "invalid or corrupted weights blob"
MSG_VERSION = "unsupported weights blob version"
MSG_LAYOUT = "invalid tensor layout"
MSG_DTYPE = "invalid tensor data type"

# The layouts OIDN accepts, keyed by number of dimensions.
_LAYOUT_BY_NDIMS = {1: "x", 4: "oihw"}

# dtype chars: the reader accepts 'h' and 'f'; the writer may also emit the
# training exporter's int8/uint8 chars so tests can build blobs OIDN rejects.
_READ_DTYPES = {"h": np.dtype("<f2"), "f": np.dtype("<f4")}
_WRITE_DTYPE_CHARS = {
    np.dtype("float16"): "h",
    np.dtype("float32"): "f",
    np.dtype("int8"): "b",
    np.dtype("uint8"): "B",
}

# The smallest possible table record: u16 name length, a 1-byte name, u8
# ndims, one u32 dim, one layout char, dtype char, u64 offset.
_MIN_RECORD_BYTE_SIZE = 2 + 1 + 1 + 4 + 1 + 1 + 8


class _Cursor:
    """Bounds-checked little-endian reads from a buffer, tracking the byte offset."""

    def __init__(self, data: bytes, offset: int) -> None:
        self.data = data
        self.offset = offset

    def take(self, byte_size: int, what: str) -> bytes:
        start = self.offset
        end = start + byte_size
        if end > len(self.data):
            raise WeightsFormatError(
                f"{MSG_CORRUPTED}: {what} at byte offset {start} needs {byte_size} bytes but "
                f"the blob ends at byte {len(self.data)}"
            )
        self.offset = end
        return self.data[start:end]

    def u8(self, what: str) -> int:
        return self.take(1, what)[0]

    def u16(self, what: str) -> int:
        return int.from_bytes(self.take(2, what), "little")

    def u32(self, what: str) -> int:
        return int.from_bytes(self.take(4, what), "little")

    def u64(self, what: str) -> int:
        return int.from_bytes(self.take(8, what), "little")


def _as_immutable_bytes(data: bytes | bytearray | memoryview) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise InvalidArgumentError(
        f"a weights blob must be bytes, bytearray or memoryview, not {type(data).__name__}"
    )


def _read_header(data: bytes) -> int:
    """Check magic and version; return the table offset."""
    cursor = _Cursor(data, 0)
    magic = cursor.u16("the magic number")
    if magic != MAGIC:
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: magic number 0x{magic:04X} at byte offset 0 is not 0x{MAGIC:04X}"
        )
    major = cursor.u8("the major version")
    if major != MAJOR_VERSION:
        raise WeightsFormatError(
            f"{MSG_VERSION}: major version {major} at byte offset 2 is not {MAJOR_VERSION}"
        )
    cursor.u8("the minor version")
    table_offset = cursor.u64("the table offset")
    if table_offset < HEADER_BYTE_SIZE or table_offset >= len(data):
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: table offset {table_offset} at byte offset 4 is outside "
            f"bytes {HEADER_BYTE_SIZE}..{len(data) - 1} of the blob"
        )
    return table_offset


def _read_record(cursor: _Cursor, index: int) -> tuple[str, tuple[int, ...], np.dtype, int, int]:
    """Read one table record; return name, dims, dtype, data offset, record offset."""
    record_offset = cursor.offset
    label = f"tensor #{index}"
    name_byte_size = cursor.u16(f"the name length of {label}")
    if name_byte_size == 0:
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: {label} at byte offset {record_offset} has an empty name"
        )
    raw_name = cursor.take(name_byte_size, f"the {name_byte_size}-byte name of {label}")
    try:
        name = raw_name.decode("utf-8")
    except UnicodeDecodeError:
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: the name of {label} at byte offset {record_offset + 2} "
            f"is not UTF-8: {raw_name!r}"
        ) from None
    label = f"tensor '{name}'"
    ndims_offset = cursor.offset
    ndims = cursor.u8(f"the number of dimensions of {label}")
    if ndims not in _LAYOUT_BY_NDIMS:
        raise WeightsFormatError(
            f"{MSG_LAYOUT}: {label} at byte offset {ndims_offset} has {ndims} dimensions; "
            "expected 1 (layout 'x') or 4 (layout 'oihw')"
        )
    dims_offset = cursor.offset
    dims = tuple(cursor.u32(f"dimension {i} of {label}") for i in range(ndims))
    if 0 in dims:
        # An empty tensor is no weight or bias of any network; numpy could not even
        # shape it when its other dimensions are huge.
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: {label} at byte offset {dims_offset} has dims {dims}; "
            "expected every dimension to be at least 1"
        )
    layout_offset = cursor.offset
    raw_layout = cursor.take(ndims, f"the layout of {label}")
    if raw_layout != _LAYOUT_BY_NDIMS[ndims].encode("ascii"):
        raise WeightsFormatError(
            f"{MSG_LAYOUT}: {label} at byte offset {layout_offset} has layout {raw_layout!r} "
            f"with {ndims} dimensions; expected '{_LAYOUT_BY_NDIMS[ndims]}'"
        )
    dtype_offset = cursor.offset
    dtype_char = chr(cursor.u8(f"the data type of {label}"))
    if dtype_char not in _READ_DTYPES:
        raise WeightsFormatError(
            f"{MSG_DTYPE}: {label} at byte offset {dtype_offset} has data type {dtype_char!r}; "
            "expected 'h' (float16) or 'f' (float32)"
        )
    data_offset = cursor.u64(f"the data offset of {label}")
    return name, dims, _READ_DTYPES[dtype_char], data_offset, record_offset


def parse_tza(data: bytes | bytearray | memoryview) -> dict[str, np.ndarray]:
    """Parse a TZA v2 blob into its tensors.

    Args:
        data: the whole blob.

    Returns:
        The tensors in table order, keyed by name, each a read-only array with the
        file's dtype (float16 or float32) and dims.

    Raises:
        WeightsFormatError: the blob is malformed; the message names the byte offset
            and the reason, and starts with OIDN's message for the condition.
        InvalidArgumentError: ``data`` is not a bytes-like object.
    """
    blob = _as_immutable_bytes(data)
    table_offset = _read_header(blob)
    cursor = _Cursor(blob, table_offset)
    count = cursor.u32("the tensor count")
    table_room = len(blob) - cursor.offset
    if count * _MIN_RECORD_BYTE_SIZE > table_room:
        raise WeightsFormatError(
            f"{MSG_CORRUPTED}: tensor count {count} at byte offset {table_offset} cannot fit in "
            f"the {table_room} bytes after it"
        )
    records = [_read_record(cursor, index) for index in range(count)]
    table_end = cursor.offset

    tensors: dict[str, np.ndarray] = {}
    extents: list[tuple[int, int, str]] = []
    for name, dims, dtype, data_offset, record_offset in records:
        if name in tensors:
            raise WeightsFormatError(
                f"{MSG_CORRUPTED}: tensor name '{name}' at byte offset {record_offset} "
                "appears twice in the table"
            )
        element_count = 1
        for dim in dims:
            element_count *= dim  # python ints: no overflow, checked before any allocation
        data_end = data_offset + element_count * dtype.itemsize
        if data_offset < HEADER_BYTE_SIZE or data_end > len(blob):
            raise WeightsFormatError(
                f"{MSG_CORRUPTED}: tensor '{name}' (dims {dims}, {dtype.name}) has data at bytes "
                f"{data_offset}..{data_end} outside bytes {HEADER_BYTE_SIZE}..{len(blob)} of "
                f"the blob (record at byte offset {record_offset})"
            )
        if data_offset < table_end and data_end > table_offset:
            raise WeightsFormatError(
                f"{MSG_CORRUPTED}: tensor '{name}' has data at bytes {data_offset}..{data_end} "
                f"overlapping the table at bytes {table_offset}..{table_end}"
            )
        extents.append((data_offset, data_end, name))
        array = np.frombuffer(blob, dtype=dtype, count=element_count, offset=data_offset)
        tensors[name] = array.reshape(dims)
    _check_no_overlap(extents)
    return tensors


def _check_no_overlap(extents: list[tuple[int, int, str]]) -> None:
    extents = sorted(extents)
    for (start_a, end_a, name_a), (start_b, end_b, name_b) in pairwise(extents):
        if start_b < end_a:
            raise WeightsFormatError(
                f"{MSG_CORRUPTED}: the data of tensor '{name_b}' at bytes {start_b}..{end_b} "
                f"overlaps that of tensor '{name_a}' at bytes {start_a}..{end_a}"
            )


def read_tza(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Read and parse a ``.tza`` file (see `parse_tza`).

    Raises:
        WeightsFormatError: the file is malformed.
        OSError: the file cannot be read.
    """
    return parse_tza(Path(path).read_bytes())


def _padding(offset: int) -> int:
    return -offset % ALIGNMENT_BYTES


def write_tza(tensors: Mapping[str, np.ndarray], *, minor: int = 0) -> bytes:
    """Serialize tensors to a TZA v2 blob laid out like the official files.

    Data blocks follow in mapping order, each starting at a multiple of 64 bytes
    (the first at 64); the table follows, also 64-aligned, listing the tensors in
    the same order; the blob ends right after the table.

    Args:
        tensors: name -> 1-D (layout ``x``) or 4-D (layout ``oihw``) array of float16
            or float32 (int8/uint8 are written as ``b``/``B`` like OIDN's training
            exporter, although OIDN and `parse_tza` reject them).
        minor: the minor version byte.

    Returns:
        The blob.

    Raises:
        InvalidArgumentError: a tensor has an unsupported rank or dtype, or a name is
            empty or longer than 65535 bytes.
    """
    if not 0 <= minor <= 0xFF:
        raise InvalidArgumentError(f"minor version {minor} does not fit in a byte")
    body = bytearray(HEADER_BYTE_SIZE)
    table = bytearray(struct.pack("<I", len(tensors)))
    for name, tensor in tensors.items():
        array = np.asarray(tensor)
        layout = _LAYOUT_BY_NDIMS.get(array.ndim)
        if layout is None:
            raise InvalidArgumentError(
                f"tensor '{name}' has {array.ndim} dimensions; expected 1 or 4"
            )
        dtype_char = _WRITE_DTYPE_CHARS.get(array.dtype.newbyteorder("="))
        if dtype_char is None:
            raise InvalidArgumentError(
                f"tensor '{name}' has dtype {array.dtype}; expected float16 or float32"
            )
        raw_name = name.encode("utf-8")
        if not 0 < len(raw_name) <= 0xFFFF:
            raise InvalidArgumentError(
                f"tensor name {name!r} has {len(raw_name)} bytes; expected 1 to 65535"
            )
        body += bytes(_padding(len(body)))
        data_offset = len(body)
        body += np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        table += struct.pack("<H", len(raw_name)) + raw_name
        table += struct.pack(f"<B{array.ndim}I", array.ndim, *array.shape)
        table += layout.encode("ascii") + dtype_char.encode("ascii")
        table += struct.pack("<Q", data_offset)
    body += bytes(_padding(len(body)))
    table_offset = len(body)
    body[0:HEADER_BYTE_SIZE] = struct.pack("<HBBQ", MAGIC, MAJOR_VERSION, minor, table_offset)
    return bytes(body + table)
