"""scripts/torch_source.py: which PyTorch scripts/test.sh installs, without any network.

A local HTTP server plays the CPU wheel index; pip runs with no configuration files and an
empty find-links folder, so that no wheel on this machine is found without an index.
"""

from __future__ import annotations

import functools
import http.server
import os
import platform
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.datasets import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "torch_source.py"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"

pytestmark = pytest.mark.skipif(platform.system() != "Linux", reason="CPU wheels: Linux only")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index served from ``tmp_path/index`` on localhost: (url, its torch page)."""
    root = tmp_path / "index"
    (root / "torch").mkdir(parents=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", root / "torch" / "index.html"
    finally:
        server.shutdown()
        server.server_close()


def run_script(
    tmp_path: Path, index_url: str, timeout_s: float = 5
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    wheels = tmp_path / "wheels"
    wheels.mkdir(exist_ok=True)
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_FIND_LINKS=str(wheels),
        OIDN_GPU_TORCH_INDEX=index_url,
        OIDN_GPU_TORCH_INDEX_TIMEOUT=str(timeout_s),
    )
    return subprocess.run(
        [sys.executable, str(SCRIPT), "2.13.0"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_cpu_build_from_an_index_that_offers_it(tmp_path, index):
    url, page = index
    wheel = f"torch-2.13.0%2Bcpu-{TAG}-{TAG}-manylinux_2_28_{platform.machine()}.whl"
    page.write_text(f'<a href="{wheel}#sha256=00">{wheel}</a>\n')
    done = run_script(tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["--extra-index-url", url, "torch==2.13.0+cpu"]
    assert done.stderr == ""


def test_an_index_without_the_wheel_falls_back_with_a_warning(tmp_path, index):
    url, page = index
    page.write_text(f'<a href="torch-2.12.0%2Bcpu-{TAG}-{TAG}-x.whl">old</a>\n')
    done = run_script(tmp_path, url)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch==2.13.0"]
    assert f"lists no torch 2.13.0+cpu wheel for {TAG}" in done.stderr
    assert "OIDN_GPU_TORCH_INDEX" in done.stderr


def test_an_index_that_never_answers_costs_only_the_timeout(tmp_path):
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        start = time.monotonic()
        done = run_script(tmp_path, f"http://127.0.0.1:{silent.getsockname()[1]}/", 1)
        elapsed = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch==2.13.0"]
    assert "could not be read" in done.stderr and "timeout 1 s" in done.stderr
    assert elapsed < 60  # pip's dry run plus the 1 s probe, not pip's 15 s x 5 retries


def test_an_empty_index_means_pip_s_own(tmp_path):
    done = run_script(tmp_path, "")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["torch==2.13.0"]
    assert done.stderr == ""
