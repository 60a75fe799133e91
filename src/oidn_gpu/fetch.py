"""Download the official weights that are too large to bundle (``oidn-gpu weights fetch``).

The three ``*_large.tza`` files live in the official repository
github.com/RenderKit/oidn-weights as Git LFS objects. GitHub serves LFS content
at ``https://media.githubusercontent.com/media/<owner>/<repo>/<ref>/<path>``; we
pin the ref to the commit that holds the OIDN 2.3+ weights (unchanged through
2.5.1, verified by SHA-256 against `oidn_gpu.model.weights.official_sha256`).

The base URL can be replaced (a mirror, or a local server in tests) with the
``OIDN_GPU_WEIGHTS_URL`` environment variable or ``--url``; files are then
``<base>/<name>.tza``. Each file is streamed into a temporary file beside its
destination, hashed on the way, and renamed into place only if the SHA-256
matches; anything else leaves no file behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from oidn_gpu.errors import OIDNGPUError

URL_ENV_VAR = "OIDN_GPU_WEIGHTS_URL"
OIDN_WEIGHTS_COMMIT = "28883d1769d5930e13cf7f1676dd852bd81ed9e7"  # "add v2.3 fast quality weights"
DEFAULT_BASE_URL = (
    f"https://media.githubusercontent.com/media/RenderKit/oidn-weights/{OIDN_WEIGHTS_COMMIT}"
)
LARGE_WEIGHTS = ("rt_alb_large", "rt_hdr_calb_cnrm_large", "rt_nrm_large")
DEFAULT_TIMEOUT_S = 30.0
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
    from oidn_gpu.model.weights import official_sha256

    sums = official_sha256()
    if name not in sums:
        raise DownloadError(f"'{name}' is not an official weights file")
    return sums[name]


def download(
    url: str,
    destination: Path,
    expected_sha256: str,
    *,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: Callable[[int, int | None], None] | None = None,
) -> int:
    """Stream ``url`` into ``destination`` atomically, verifying its SHA-256.

    Args:
        progress: called with (bytes so far, total bytes or None).

    Returns:
        The number of bytes written.

    Raises:
        DownloadError: network failure (with an "offline?" hint), HTTP error or
            checksum mismatch; no file is left at ``destination`` or beside it.
    """
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.name}.part-{os.getpid()}")
    digest = hashlib.sha256()
    written = 0
    try:
        request = urllib.request.Request(url, headers={"User-Agent": "oidn-gpu"})
        try:
            response = urllib.request.urlopen(request, timeout=timeout_s)
        except urllib.error.HTTPError as err:
            raise DownloadError(f"could not download {url}: HTTP {err.code} {err.reason}") from None
        except (TimeoutError, urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise DownloadError(
                f"could not download {url}: {reason} (offline? set {URL_ENV_VAR} or --url to a "
                "mirror, or copy the files into the weights folder by hand)"
            ) from None
        with response, tmp.open("wb") as f:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            while True:
                try:
                    chunk = response.read(CHUNK_BYTES)
                except (TimeoutError, OSError) as err:
                    raise DownloadError(f"could not download {url}: {err} (offline?)") from None
                if not chunk:
                    break
                f.write(chunk)
                digest.update(chunk)
                written += len(chunk)
                if progress is not None:
                    progress(written, total)
        got = digest.hexdigest()
        if got != expected_sha256:
            raise DownloadError(
                f"sha-256 mismatch for {url}: got {got}, expected {expected_sha256}; "
                "the file was not saved"
            )
        os.replace(tmp, destination)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return written


def fetch_weights(
    names: Sequence[str] = LARGE_WEIGHTS,
    *,
    directory: Path | None = None,
    url: str | None = None,
    force: bool = False,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress_factory: Callable[[str], Callable[[int, int | None], None] | None] | None = None,
) -> list[FetchResult]:
    """Download official weights files into the user weights folder.

    Files already present with the right SHA-256 are kept unless ``force``.

    Raises:
        DownloadError: the first file that fails (files fetched before it stay).
    """
    if directory is None:
        from oidn_gpu.model.weights import user_weights_dir

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
            f"{base}/{name}.tza", destination, expected, timeout_s=timeout_s, progress=callback
        )
        results.append(FetchResult(name, destination, "downloaded", size))
    return results
