"""Download the official weights that are too large to bundle (``oidn-gpu weights fetch``).

The three ``*_large.tza`` files live in the official repository
github.com/RenderKit/oidn-weights as Git LFS objects. GitHub serves LFS content
at ``https://media.githubusercontent.com/media/<owner>/<repo>/<ref>/<path>``; we
pin the ref to the commit that holds the OIDN 2.3+ weights (unchanged through
2.5.1, verified by SHA-256 against `oidn_gpu.model.weights.official_sha256`).

The base URL can be replaced (a mirror, or a local server in tests) with the
``OIDN_GPU_WEIGHTS_URL`` environment variable or ``--url``; files are then
``<base>/<name>.tza``. Each file is streamed into a temporary file beside its
destination (`oidn_gpu.files.atomic_write`), hashed on the way, and renamed into
place only if its size and SHA-256 match; anything else leaves no file behind.
The known size bounds the download: a server announcing another length is
refused, a longer body is cut off, a shorter one is an "incomplete download",
and a whole-file deadline stops a server that sends too slowly. The deadline covers
everything from the first connection on (redirects, the status line and headers, the
body): when it passes, a watchdog thread shuts the open connection down, which ends
any read in progress at once, whatever the server sends. Redirects are followed to
http and https only.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oidn_gpu.errors import OIDNGPUError
from oidn_gpu.files import atomic_write
from oidn_gpu.model.weights import bundled_weights_dir, official_sha256, user_weights_dir

URL_ENV_VAR = "OIDN_GPU_WEIGHTS_URL"
OIDN_WEIGHTS_COMMIT = "28883d1769d5930e13cf7f1676dd852bd81ed9e7"  # "add v2.3 fast quality weights"
DEFAULT_BASE_URL = (
    f"https://media.githubusercontent.com/media/RenderKit/oidn-weights/{OIDN_WEIGHTS_COMMIT}"
)
LARGE_WEIGHTS = ("rt_alb_large", "rt_hdr_calb_cnrm_large", "rt_nrm_large")
# Byte sizes of the large files at OIDN_WEIGHTS_COMMIT (the files whose SHA-256 sums are
# `oidn_gpu.model.weights.LARGE_WEIGHTS_SHA256`).
LARGE_WEIGHTS_BYTES = {
    "rt_alb_large": 7_684_615,
    "rt_hdr_calb_cnrm_large": 7_698_439,
    "rt_nrm_large": 7_684_615,
}
DEFAULT_TIMEOUT_S = 30.0
DEADLINE_PER_TIMEOUT = 20  # default whole-file deadline: 20 x the per-read timeout
CHUNK_BYTES = 1 << 20


class DownloadError(OIDNGPUError, OSError):
    """A weights file could not be downloaded or failed verification."""


@dataclass(frozen=True)
class FetchResult:
    """What happened to one file: 'downloaded', 'present' (already there, verified)."""

    name: str
    path: Path
    status: str
    byte_size: int


def base_url(override: str | None = None) -> str:
    """The download base: ``override``, else ``$OIDN_GPU_WEIGHTS_URL``, else GitHub's LFS host."""
    url = override or os.environ.get(URL_ENV_VAR) or DEFAULT_BASE_URL
    return url.rstrip("/")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _expected_sha256(name: str) -> str:
    sums = official_sha256()
    if name not in sums:
        raise DownloadError(f"'{name}' is not an official weights file")
    return sums[name]


def expected_byte_size(name: str) -> int:
    """The size of an official weights file: recorded for the large ones, else the
    bundled copy's size.

    Raises:
        DownloadError: the size of ``name`` is not known.
    """
    if name in LARGE_WEIGHTS_BYTES:
        return LARGE_WEIGHTS_BYTES[name]
    try:
        return (bundled_weights_dir() / f"{name}.tza").stat().st_size
    except OSError:
        raise DownloadError(f"the size of '{name}.tza' is not known") from None


def _read_some(response: Any, url: str, received: int, expected: int, watchdog: _Watchdog) -> bytes:
    try:
        # read1: what has arrived (one socket read at most), so a slow server cannot
        # hold one call for longer than the socket timeout
        chunk = response.read1(CHUNK_BYTES)
    except http.client.IncompleteRead:
        chunk = b""  # the server closed early; reported below with the byte counts
    except (TimeoutError, OSError, http.client.HTTPException) as err:
        if watchdog.expired:
            raise _late(url, watchdog, received, expected) from None
        raise DownloadError(
            f"could not download {url}: {err} after {received} of {expected} bytes (offline?)"
        ) from None
    if watchdog.expired:  # the connection was shut down: the end seen is not the server's
        raise _late(url, watchdog, received, expected)
    return chunk


class _Watchdog:
    """The whole-file deadline: every connection opened for the file is shut down when it
    passes, so a read in progress ends at once (a server sending its status line one byte
    at a time keeps each read within the per-read timeout, never within the deadline)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.stop_at = time.monotonic() + seconds
        self.expired = False
        self._connections: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    @contextlib.contextmanager
    def running(self) -> Iterator[_Watchdog]:
        self._timer.start()
        try:
            yield self
        finally:
            self._timer.cancel()

    def remaining_s(self) -> float:
        return max(0.0, self.stop_at - time.monotonic())

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            connections = list(self._connections)
        for connection in connections:
            _shut(connection)

    def watch(self, connection: http.client.HTTPConnection) -> None:
        with self._lock:
            self._connections.append(connection)
            expired = self.expired
        if expired:
            _shut(connection)

    def connection_class(self, base: type[http.client.HTTPConnection]) -> Callable[..., Any]:
        """A stand-in for ``base`` whose connections are watched and whose connect timeout
        ends with the deadline."""

        def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
            timeout = kwargs.get("timeout")
            if isinstance(timeout, (int, float)):
                kwargs["timeout"] = max(0.001, min(timeout, self.remaining_s()))
            connection = base(host, **kwargs)
            self.watch(connection)
            return connection

        return make


def _shut(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed
            sock.shutdown(socket.SHUT_RDWR)


class _WatchedHTTP(urllib.request.HTTPHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def http_open(self, req: urllib.request.Request) -> Any:
        return self.do_open(self._watchdog.connection_class(http.client.HTTPConnection), req)


class _WatchedHTTPS(urllib.request.HTTPSHandler):
    def __init__(self, watchdog: _Watchdog) -> None:
        super().__init__()
        self._watchdog = watchdog

    def https_open(self, req: urllib.request.Request) -> Any:
        connection = self._watchdog.connection_class(http.client.HTTPSConnection)
        return self.do_open(connection, req, context=self._context)


class _HttpRedirects(urllib.request.HTTPRedirectHandler):
    """Redirects followed to http and https only (urllib also follows ftp)."""

    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> Any:
        scheme = urllib.parse.urlsplit(newurl).scheme.lower()
        if scheme not in ("http", "https"):
            raise DownloadError(
                f"could not download {req.full_url}: the server redirects to {newurl!r}; "
                "only http and https are followed"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _open_url(url: str, timeout_s: float, watchdog: _Watchdog) -> Any:
    """The response of a GET of ``url``; `DownloadError` (with an "offline?" hint) if none."""
    opener = urllib.request.build_opener(
        _WatchedHTTP(watchdog), _WatchedHTTPS(watchdog), _HttpRedirects()
    )
    request = urllib.request.Request(url, headers={"User-Agent": "oidn-gpu"})
    try:
        response = opener.open(request, timeout=max(0.001, min(timeout_s, watchdog.remaining_s())))
    except urllib.error.HTTPError as err:
        raise DownloadError(f"could not download {url}: HTTP {err.code} {err.reason}") from None
    except (TimeoutError, urllib.error.URLError, OSError, http.client.HTTPException) as err:
        if watchdog.expired:
            raise _late(url, watchdog, 0, None) from None
        reason = getattr(err, "reason", err)
        raise DownloadError(
            f"could not download {url}: {reason} (offline? set {URL_ENV_VAR} or --url to a "
            "mirror, or copy the files into the weights folder by hand)"
        ) from None
    if watchdog.expired:  # the headers ended where the connection was shut down
        response.close()
        raise _late(url, watchdog, 0, None)
    return response


def _late(url: str, watchdog: _Watchdog, received: int, expected: int | None) -> DownloadError:
    what = "no response" if expected is None else f"{received} of {expected} bytes"
    return DownloadError(
        f"could not download {url}: not complete after {watchdog.seconds:g} s "
        f"({what}; see --deadline); the file was not saved"
    )


def download(
    url: str,
    destination: Path,
    expected_sha256: str,
    *,
    expected_bytes: int,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    deadline_s: float | None = None,
    progress: Callable[[int, int | None], None] | None = None,
) -> int:
    """Stream ``url`` into ``destination`` atomically, verifying its size and SHA-256.

    Args:
        expected_bytes: the file's size; a server announcing another length is refused
            before reading, and a longer body is cut off with an error.
        timeout_s: for connecting and for each read.
        deadline_s: for the whole file, from the first connection to the last byte
            (default ``DEADLINE_PER_TIMEOUT`` x ``timeout_s``).
        progress: called with (bytes so far, total bytes).

    Returns:
        The number of bytes written.

    Raises:
        DownloadError: network failure (with an "offline?" hint), HTTP error, wrong or
            incomplete length, deadline passed or checksum mismatch; no file is left at
            ``destination`` or beside it.
    """
    if deadline_s is None:
        deadline_s = DEADLINE_PER_TIMEOUT * timeout_s
    with _Watchdog(deadline_s).running() as watchdog:
        return _stream(
            url, destination, expected_sha256, expected_bytes, timeout_s, watchdog, progress
        )


def _stream(
    url: str,
    destination: Path,
    expected_sha256: str,
    expected_bytes: int,
    timeout_s: float,
    watchdog: _Watchdog,
    progress: Callable[[int, int | None], None] | None,
) -> int:
    """`download`'s body: the response streamed into the destination and checked."""
    response = _open_url(url, timeout_s, watchdog)
    digest = hashlib.sha256()
    written = 0
    with response:
        length = response.headers.get("Content-Length")
        if length is not None and length.strip() != str(expected_bytes):
            raise DownloadError(
                f"could not download {url}: the server announces {length.strip()} bytes but "
                f"the file has {expected_bytes}; the file was not saved"
            )
        with atomic_write(destination) as tmp:
            while True:
                chunk = _read_some(response, url, written, expected_bytes, watchdog)
                if not chunk:
                    break
                if written + len(chunk) > expected_bytes:
                    raise DownloadError(
                        f"could not download {url}: the server sent more than the "
                        f"{expected_bytes} bytes of the file; the file was not saved"
                    )
                tmp.file.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(written, expected_bytes)
            if written != expected_bytes:
                raise DownloadError(
                    f"incomplete download of {url} ({written} of {expected_bytes} bytes); "
                    "the file was not saved"
                )
            got = digest.hexdigest()
            if got != expected_sha256:
                raise DownloadError(
                    f"sha-256 mismatch for {url}: got {got}, expected {expected_sha256}; "
                    "the file was not saved"
                )
    return written


def fetch_weights(
    names: Sequence[str] = LARGE_WEIGHTS,
    *,
    directory: Path | None = None,
    url: str | None = None,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    deadline_s: float | None = None,
    progress_factory: Callable[[str], Callable[[int, int | None], None] | None] | None = None,
) -> list[FetchResult]:
    """Download official weights files into the user weights folder.

    Files already present with the right SHA-256 are kept unless ``force``.
    ``timeout_s`` bounds connecting and each read, ``deadline_s`` each whole file
    (see `download`).

    Raises:
        DownloadError: the first file that fails (files fetched before it stay).
    """
    if directory is None:
        directory = user_weights_dir()
    results = []
    base = base_url(url)
    for name in names:
        expected = _expected_sha256(name)
        destination = directory / f"{name}.tza"
        if not force and destination.is_file() and sha256_of(destination) == expected:
            results.append(FetchResult(name, destination, "present", destination.stat().st_size))
            continue
        callback = progress_factory(name) if progress_factory is not None else None
        size = download(
            f"{base}/{name}.tza",
            destination,
            expected,
            expected_bytes=expected_byte_size(name),
            timeout_s=timeout_s,
            deadline_s=deadline_s,
            progress=callback,
        )
        results.append(FetchResult(name, destination, "downloaded", size))
    return results
