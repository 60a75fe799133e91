"""``oidn-gpu weights fetch`` against a local HTTP server (this machine has no GitHub access).

The server serves the official large files (from the package, else from the full-size
data set) or, without them, stand-ins whose SHA-256 and size replace the official ones for
the test; a corrupted copy for the checksum case, and a closed port stands in for "offline".
A second server misbehaves on purpose with a body of the official size: it drips, lies
about the length, sends too much or closes early.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_support import leftovers, pythonpath_env

from oidn_gpu.fetch import (
    DEFAULT_BASE_URL,
    LARGE_WEIGHTS,
    LARGE_WEIGHTS_BYTES,
    URL_ENV_VAR,
    base_url,
)
from oidn_gpu.files import TEMP_PREFIX
from oidn_gpu.model import weights
from oidn_gpu.model.weights import LARGE_WEIGHTS_SHA256
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
    large U-Net) whose SHA-256 and size take the official ones' place for this test."""
    shared = datasets.locate_shared_dir()
    files = {}
    for name in LARGE_WEIGHTS:
        path = weights.bundled_weights_dir() / f"{name}.tza"
        if not path.is_file() and shared is not None:
            path = shared / "weights" / f"{name}.tza"
        if not path.is_file():
            path = datasets.DATA_DIR / "tiny_large_ic6.tza"
            blob = path.read_bytes()
            monkeypatch.setitem(LARGE_WEIGHTS_SHA256, name, hashlib.sha256(blob).hexdigest())
            monkeypatch.setitem(LARGE_WEIGHTS_BYTES, name, len(blob))
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


def test_recorded_sizes_and_sums_are_those_of_the_official_files(weights_dir: Path) -> None:
    for name in LARGE_WEIGHTS:
        blob = (weights_dir / f"{name}.tza").read_bytes()
        assert len(blob) == LARGE_WEIGHTS_BYTES[name]
        assert hashlib.sha256(blob).hexdigest() == LARGE_WEIGHTS_SHA256[name]


def test_failed_fetch_never_writes_through_a_planted_link(
    cli, server: str, server_root: Path, large_files: dict[str, Path], tmp_path: Path
) -> None:
    _serve_official(large_files, server_root)
    corrupted = bytearray((server_root / "rt_alb_large.tza").read_bytes())
    corrupted[1000] ^= 0xFF
    (server_root / "rt_alb_large.tza").write_bytes(bytes(corrupted))
    dest = tmp_path / "w"
    dest.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"precious")
    # the predictable temporary name of older versions, for this process
    (dest / f".rt_alb_large.tza.part-{os.getpid()}").symlink_to(victim)
    result = cli("weights", "fetch", "--dir", dest, "--url", server, "--quiet")
    assert result.rc == 1 and "sha-256 mismatch" in result.err
    assert victim.read_bytes() == b"precious"
    assert leftovers(tmp_path) == [] and not (dest / "rt_alb_large.tza").exists()


class _BadServer(http.server.BaseHTTPRequestHandler):
    """Serves rt_alb_large.tza badly; the behaviour is the first path component."""

    body = b""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        how = self.path.strip("/").split("/")[0]
        body = self.body
        try:
            if how == "drip":  # right length announced, one byte every 50 ms
                self._head(len(body))
                for byte in body:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            elif how == "driphead":  # the status line and headers one byte every 50 ms
                head = b"HTTP/1.1 200 OK\r\nX-Pad: " + b"a" * 600 + b"\r\n\r\n"
                for byte in head:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.05)
            elif how == "toftp":  # a redirect to another scheme
                self.send_response(302)
                self.send_header("Location", "ftp://127.0.0.1:9/rt_alb_large.tza")
                self.end_headers()
            elif how == "lie":  # announces more than the file has
                self._head(len(body) + 1000)
                self.wfile.write(body)
            elif how == "toomuch":  # no length, then more than the file
                self._head(None)
                self.wfile.write(body + b"\0" * 4096)
            elif how == "short":  # right length, then closes half way
                self._head(len(body))
                self.wfile.write(body[: len(body) // 2])
            elif how == "shortnolength":  # no length, closes half way
                self._head(None)
                self.wfile.write(body[: len(body) // 2])
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up, as it should

    def _head(self, length: int | None) -> None:
        self.send_response(200)
        if length is not None:
            self.send_header("Content-Length", str(length))
        self.end_headers()


@pytest.fixture
def bad_server() -> Iterator[str]:
    # Any body of the official size: these cases fail before the checksum is computed.
    body = bytes(range(256)) * (LARGE_WEIGHTS_BYTES["rt_alb_large"] // 256 + 1)
    handler = type("Handler", (_BadServer,), {"body": body[: LARGE_WEIGHTS_BYTES["rt_alb_large"]]})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("lie", r"announces 7685615 bytes but the file has 7684615"),
        ("toomuch", r"sent more than the 7684615 bytes of the file"),
        ("short", r"incomplete download of .* \(3842307 of 7684615 bytes\)"),
        ("shortnolength", r"incomplete download of .* \(3842307 of 7684615 bytes\)"),
    ],
)
def test_wrong_lengths_are_named_and_keep_nothing(
    cli, bad_server: str, tmp_path: Path, how: str, message: str
) -> None:
    from oidn_gpu.fetch import DownloadError, fetch_weights

    dest = tmp_path / "w"
    with pytest.raises(DownloadError, match=message):
        fetch_weights(["rt_alb_large"], directory=dest, url=f"{bad_server}/{how}", timeout_s=5)
    assert not dest.exists() or list(dest.iterdir()) == []
    result = cli("weights", "fetch", "--dir", dest, "--url", f"{bad_server}/{how}", "--quiet")
    assert result.rc == 1 and "sha-256" not in result.err
    assert not dest.exists() or list(dest.iterdir()) == []


def test_deadline_stops_a_server_that_drips(cli, bad_server: str, tmp_path: Path) -> None:
    dest = tmp_path / "w"
    start = time.monotonic()
    result = cli(
        "weights",
        "fetch",
        "--dir",
        dest,
        "--url",
        f"{bad_server}/drip",
        "--timeout",
        "1",
        "--deadline",
        "1.5",
        "--quiet",
    )
    elapsed = time.monotonic() - start
    assert result.rc == 1
    assert "not complete after 1.5 s" in result.err and "of 7684615 bytes" in result.err
    assert elapsed < 1.5 + 1.0  # the deadline, not the body or the read timeout
    assert not dest.exists() or list(dest.iterdir()) == []


def test_deadline_covers_a_status_line_and_headers_sent_one_byte_at_a_time(
    cli, bad_server: str, tmp_path: Path
) -> None:
    dest = tmp_path / "w"
    start = time.monotonic()
    result = cli(
        "weights",
        "fetch",
        "--dir",
        dest,
        "--url",
        f"{bad_server}/driphead",
        "--timeout",
        "1",
        "--deadline",
        "1.5",
        "--quiet",
    )
    elapsed = time.monotonic() - start
    assert result.rc == 1
    assert "not complete after 1.5 s (no response; see --deadline)" in result.err
    assert elapsed < 1.5 + 1.0  # each byte comes within the read timeout: only the deadline ends it
    assert not dest.exists() or list(dest.iterdir()) == []


def test_a_redirect_to_another_scheme_is_not_followed(cli, bad_server: str, tmp_path: Path) -> None:
    dest = tmp_path / "w"
    result = cli("weights", "fetch", "--dir", dest, "--url", f"{bad_server}/toftp", "--quiet")
    assert result.rc == 1
    assert "redirects to 'ftp://127.0.0.1:9/rt_alb_large.tza'" in result.err
    assert "only http and https are followed" in result.err


def test_fetch_help_names_the_deadline_default(cli) -> None:
    result = cli("weights", "fetch", "--help")
    assert result.rc == 0 and "default 20 x --timeout, so 600" in " ".join(result.out.split())


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_during_a_download_leaves_no_part_file(bad_server: str, tmp_path: Path) -> None:
    dest = tmp_path / "w"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oidn_gpu",
            "weights",
            "fetch",
            "--dir",
            str(dest),
            "--url",
            f"{bad_server}/drip",
            "--quiet",
        ],
        env=pythonpath_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not (dest.is_dir() and any(p.name.startswith(TEMP_PREFIX) for p in dest.iterdir())):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no part file appeared"
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "error: interrupted" in err
    assert list(dest.iterdir()) == []
