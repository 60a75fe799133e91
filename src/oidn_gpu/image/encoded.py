"""OpenImageIO's encoders run so that a failed write is an error, never a truncated file,
an exited process or a hung one.

On a full disk (or a file-size limit) OpenImageIO 3.2's writers behave very differently
(found by writing each format under ``RLIMIT_FSIZE``): the OpenEXR, TIFF, PFM and Radiance
HDR writers report the failed write; the PNG writer truncates the file and reports success;
libjpeg's error handler ends the whole process; the WebP writer retries forever at full CPU.
So every write here:

* encodes the formats that hold only 8/16-bit pixels (PNG, JPEG, WebP, GIF, ...: files a
  few times smaller than the float pixels) into memory first (a ``memfd`` on Linux, else a
  file in the system's temporary folder), where a write cannot fail; the encoded bytes are
  then reserved on the disk at once (``posix_fallocate``: a full disk is known before
  anything is written) and copied by Python, whose failed writes raise. A file-size limit
  (``ulimit -f``, which applies to the file in memory too) is checked before encoding
  against the most such a file can take (`encoded_bound_bytes`);
* runs the encoder in a worker thread while the calling thread waits in Python, so SIGTERM
  and Ctrl-C are handled within a fraction of a second even while a large file is being
  compressed (the interrupted encoder finishes into a temporary file already removed);
* decodes what was written, band by band, and checks every part's size and channel count
  before the temporary file replaces the destination (`oidn_gpu.files.atomic_write`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oidn_gpu.files import atomic_write
from oidn_gpu.image.image_types import ImageFileError, library_error
from oidn_gpu.image.image_types import oiio as _oiio

# Formats whose encoder fails silently or fatally on a failed write, and whose files are small
# (8/16-bit pixels): encoded in memory, then copied.
IN_MEMORY_FORMATS = frozenset({"png", "jpeg", "webp", "gif", "bmp", "targa", "ico", "sgi"})
_WAIT_S = 0.05  # how often the waiting thread returns to Python (signal handlers run there)
_COPY_BYTES = 1 << 20
_VERIFY_BAND_VALUES = 1 << 22  # values decoded at a time when checking a written file
_HEADER_BYTES = 1 << 20
_NO_SPACE = {errno.ENOSPC, errno.EFBIG, getattr(errno, "EDQUOT", errno.ENOSPC)}


# The bytes a whole file of these formats ends with, where their reader decodes every pixel
# of a file cut after its last image data: OpenImageIO 3.2 reads a PNG without its 12-byte
# IEND chunk without an error (its JPEG reader reports a missing end marker itself).
_FORMAT_ENDINGS = {"png": b"\0\0\0\0IEND\xaeB`\x82"}


def missing_end(name: str | os.PathLike[str], format_name: str) -> str | None:
    """Why the file ``name`` of ``format_name`` is cut short (its format's last bytes are
    missing), or None."""
    ending = _FORMAT_ENDINGS.get(format_name)
    if ending is None:
        return None
    try:
        with open(name, "rb") as file:
            file.seek(0, os.SEEK_END)
            size = file.tell()
            file.seek(max(0, size - len(ending)))
            last = file.read()
    except OSError as err:
        return (err.strerror or str(err)).lower()
    if last != ending:
        return f"it ends before the end of its {format_name.upper()} data"
    return None


@dataclass(frozen=True)
class PartShape:
    """What one part of a written file must decode to."""

    width: int
    height: int
    nchannels: int

    def __str__(self) -> str:
        return f"{self.width}x{self.height} px with {self.nchannels} channels"


def encoded_bound_bytes(parts: Sequence[PartShape], value_bytes: int) -> int:
    """The most bytes an 8/16-bit file of ``parts`` takes: twice its raw pixels (JPEG of
    noise at the highest quality, PNG's per-row filter bytes and stored blocks stay below)
    and room for its header and metadata."""
    raw = sum(p.width * p.height * p.nchannels for p in parts) * value_bytes
    return 2 * raw + _HEADER_BYTES


def write_encoded(
    path: Path,
    format_name: str,
    encode: Callable[[str], None],
    parts: Sequence[PartShape],
    value_bytes: int,
) -> None:
    """Write ``path`` atomically with ``encode(name)``, which writes the file by name and
    raises `ImageFileError` when the library reports a failure; ``parts`` are what the file
    holds, ``value_bytes`` the size of one stored value (1 for uint8).

    Raises:
        ImageFileError: the encoder failed, the disk is full, or what was written does
            not decode to ``parts``; ``path`` is then untouched and no temporary file is left.
        OutputFileError: the folder cannot be created or written.
    """
    with atomic_write(path) as tmp:
        if format_name in IN_MEMORY_FORMATS:
            _check_size_limit(path, encoded_bound_bytes(parts, value_bytes))
            with _memory_file(path.suffix) as (name, fd):
                run_interruptibly(encode, name)
                _copy(fd, tmp.file, path)
        else:
            tmp.file.close()  # OpenImageIO writes the (empty, exclusively created) file by name
            run_interruptibly(encode, str(tmp.path))
        verify_written(tmp.path, path, parts)


def run_interruptibly(work: Callable[[str], None], name: str) -> None:
    """``work(name)`` in a worker thread; this thread waits where signals are handled.

    An exception of ``work`` is raised here. If this thread is interrupted (SIGTERM after
    `oidn_gpu.files.install_signal_cleanup`, Ctrl-C), the interruption is raised at once and
    the worker, a daemon thread, is left to finish into a file that is already removed.
    """
    failure: list[BaseException] = []

    def run() -> None:
        try:
            work(name)
        except BaseException as err:  # handed to the waiting thread
            failure.append(err)

    worker = threading.Thread(target=run, name="oidn-gpu-encoder", daemon=True)
    worker.start()
    while worker.is_alive():
        worker.join(_WAIT_S)
    if failure:
        raise failure[0]


def _check_size_limit(path: Path, bound: int) -> None:
    try:
        import resource
    except ImportError:  # not POSIX: no file-size limit
        return
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and bound > limit:
        raise ImageFileError(
            f"cannot write '{path}': the file-size limit (ulimit -f) is {limit} bytes and "
            f"this file may take up to {bound} bytes; raise the limit"
        )


@contextlib.contextmanager
def _memory_file(suffix: str) -> Iterator[tuple[str, int]]:
    """A file in memory (its name, its descriptor), removed on exit."""
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("oidn-gpu-encoded")
        try:
            yield f"/proc/self/fd/{fd}", fd
        finally:
            os.close(fd)
        return
    fd, name = tempfile.mkstemp(prefix="oidn-gpu-encoded-", suffix=suffix)
    try:
        yield name, fd
    finally:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(name)


def _copy(source_fd: int, target: Any, path: Path) -> None:
    """Reserve the encoded file's bytes on the disk, then copy them into ``target``."""
    size = os.fstat(source_fd).st_size
    try:
        _reserve(target.fileno(), size)
        offset = 0
        while offset < size:
            chunk = os.pread(source_fd, min(_COPY_BYTES, size - offset), offset)
            if not chunk:
                raise ImageFileError(f"cannot write '{path}': its encoded data ended early")
            target.write(chunk)
            offset += len(chunk)
        target.flush()
    except ImageFileError:
        raise
    except OSError as err:
        raise ImageFileError(f"cannot write '{path}': {_reason(err, size)}") from None
    written = os.fstat(target.fileno()).st_size
    if written != size:
        raise ImageFileError(f"cannot write '{path}': {written} of its {size} bytes were written")


def _reserve(fd: int, size: int) -> None:
    if size == 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as err:
        if err.errno in _NO_SPACE:
            raise
        # EOPNOTSUPP, EINVAL: the file system cannot reserve; the copy still reports errors


def _reason(err: OSError, size: int) -> str:
    reason = (err.strerror or str(err)).lower()
    if err.errno in _NO_SPACE:
        return f"no space for its {size} bytes ({reason})"
    return reason


def verify_written(name: Path, path: Path, parts: Sequence[PartShape]) -> None:
    """Decode every part of the written file ``name`` (destination ``path``) to its last
    pixel, a band of rows at a time, and check each part's size and channel count.

    Raises:
        ImageFileError: the file does not decode, or decodes to other sizes.
    """
    oiio = _oiio()
    inp = oiio.ImageInput.open(str(name))
    if inp is None:
        message = library_error(oiio.geterror, "unknown error")
        raise ImageFileError(f"cannot write '{path}': what was written does not decode ({message})")
    try:
        for index, expected in enumerate(parts):
            if not inp.seek_subimage(index, 0):
                raise ImageFileError(f"cannot write '{path}': part {index} was not written")
            spec = inp.spec()
            got = PartShape(spec.width, spec.height, spec.nchannels)
            if got != expected:
                raise ImageFileError(
                    f"cannot write '{path}': what was written is {got}; expected {expected}"
                )
            _decode_part(inp, index, spec, path)
        cut = missing_end(name, inp.format_name())
        if cut is not None:
            raise ImageFileError(f"cannot write '{path}': what was written is cut short ({cut})")
    finally:
        inp.close()


def _decode_part(inp: Any, index: int, spec: Any, path: Path) -> None:
    rows = max(1, _VERIFY_BAND_VALUES // max(1, spec.width * spec.nchannels))
    if spec.tile_height:
        rows = max(spec.tile_height, rows // spec.tile_height * spec.tile_height)
    top, bottom = spec.y, spec.y + spec.height
    for y in range(top, bottom, rows):
        end = min(bottom, y + rows)
        if spec.tile_width:
            z0, z1 = spec.z, spec.z + max(1, spec.depth)
            x0, x1 = spec.x, spec.x + spec.width
            band = inp.read_tiles(index, 0, x0, x1, y, end, z0, z1, 0, spec.nchannels, "float")
        else:
            band = inp.read_scanlines(index, 0, y, end, spec.z, 0, spec.nchannels, "float")
        if band is None or inp.has_error:
            message = library_error(inp.geterror, "read failed")
            raise ImageFileError(
                f"cannot write '{path}': what was written does not decode ({message})"
            )
