"""``oidn-gpu weights fetch`` against a local HTTP server (this machine has no GitHub access).

The server serves the official large files (from the package, else from the full-size
data set) or, without them, stand-ins whose SHA-256 replaces the official one for the
test; a corrupted copy for the checksum case, and a closed port stands in for "offline".
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from oidn_gpu.fetch import DEFAULT_BASE_URL, LARGE_WEIGHTS, URL_ENV_VAR, base_url
from oidn_gpu.model import weights
from tests import datasets


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server_root(tmp_path: Path) -> Path:
    root = tmp_path / "served"
    root.mkdir()
    return root


@pytest.fixture
def server(server_root: Path) -> Iterator[str]:
    """Base URL of a loopback HTTP server serving ``server_root``."""
    handler = functools.partial(_QuietHandler, directory=str(server_root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def large_files(monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """The file `weights fetch` must deliver for each large weights name: the official one
    where the package or the full-size data set has it, else a stand-in (a tiny generated
    large U-Net) whose SHA-256 takes the official one's place for this test."""
    shared = datasets.locate_shared_dir()
    files = {}
    for name in LARGE_WEIGHTS:
        path = weights.bundled_weights_dir() / f"{name}.tza"
        if not path.is_file() and shared is not None:
            path = shared / "weights" / f"{name}.tza"
        if not path.is_file():
            path = datasets.DATA_DIR / "tiny_large_ic6.tza"
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            monkeypatch.setitem(weights.LARGE_WEIGHTS_SHA256, name, digest)
        files[name] = path
    return files


def _serve_official(large_files: dict[str, Path], root: Path) -> None:
    for name, path in large_files.items():
        shutil.copyfile(path, root / f"{name}.tza")


def test_fetch_downloads_and_verifies_the_three_large_files(
    cli, server: str, server_root: Path, large_files: dict[str, Path], tmp_path: Path
) -> None:
    _serve_official(large_files, server_root)
    dest = tmp_path / "user-weights"
    result = cli("weights", "fetch", "--dir", dest, "--url", server, "--quiet")
    assert result.rc == 0, result.err
    for name in LARGE_WEIGHTS:
        assert (dest / f"{name}.tza").read_bytes() == large_files[name].read_bytes()
    assert sorted(p.name for p in dest.iterdir()) == sorted(f"{n}.tza" for n in LARGE_WEIGHTS)
    again = cli("weights", "fetch", "--dir", dest, "--url", server)
    assert again.rc == 0 and again.err.count("already present") == 3


def test_url_comes_from_the_environment(
    cli, server: str, server_root: Path, large_files: dict[str, Path], tmp_path: Path, monkeypatch
) -> None:
    _serve_official(large_files, server_root)
    monkeypatch.setenv(URL_ENV_VAR, server + "/")
    assert base_url() == server
    result = cli("weights", "fetch", "--dir", tmp_path / "w", "--quiet")
    assert result.rc == 0, result.err


def test_default_url_is_the_official_lfs_host(monkeypatch) -> None:
    monkeypatch.delenv(URL_ENV_VAR, raising=False)
    assert base_url() == DEFAULT_BASE_URL
    assert base_url().startswith(
        "https://media.githubusercontent.com/media/RenderKit/oidn-weights/"
    )


def test_checksum_mismatch_keeps_nothing(
    cli, server: str, server_root: Path, large_files: dict[str, Path], tmp_path: Path
) -> None:
    _serve_official(large_files, server_root)
    corrupted = bytearray((server_root / "rt_alb_large.tza").read_bytes())
    corrupted[1000] ^= 0xFF
    (server_root / "rt_alb_large.tza").write_bytes(bytes(corrupted))
    dest = tmp_path / "w"
    result = cli("weights", "fetch", "--dir", dest, "--url", server, "--quiet")
    assert result.rc == 1
    assert result.err.startswith("error: sha-256 mismatch for ")
    assert "rt_alb_large.tza" in result.err
    assert not dest.exists() or list(dest.iterdir()) == []


def test_missing_file_on_server_is_an_http_error(cli, server: str, tmp_path: Path) -> None:
    result = cli("weights", "fetch", "--dir", tmp_path / "w", "--url", server, "--quiet")
    assert result.rc == 1 and "HTTP 404" in result.err


def test_offline_gives_a_clear_error(cli, tmp_path: Path) -> None:
    with socket.socket() as sock:  # find a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    result = cli(
        "weights", "fetch", "--dir", tmp_path / "w", "--url", url, "--timeout", "5", "--quiet"
    )
    assert result.rc == 1
    assert result.err.startswith(f"error: could not download {url}/rt_alb_large.tza")
    assert "(offline?" in result.err
    assert not (tmp_path / "w").exists() or list((tmp_path / "w").iterdir()) == []


def test_weights_without_action_is_a_usage_error(cli) -> None:
    result = cli("weights")
    assert result.rc == 2 and result.err.startswith("error: missing action")
