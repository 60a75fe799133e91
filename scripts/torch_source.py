"""Which PyTorch ``scripts/test.sh`` installs: the pip arguments, one per line on stdout.

The tests need only a CPU build of PyTorch (the CUDA backend's kernels run through Triton's
interpreter). PyPI's Linux ``torch`` wheels are CUDA builds that pull in about 20 ``nvidia-*``
wheels (several GB), so this picks, in order:

1. a CPU wheel pip already has without any index (``find-links`` folders, a local wheel house);
2. the CPU build from ``$OIDN_GPU_TORCH_INDEX`` (default PyTorch's CPU wheel index), when a
   bounded probe (``$OIDN_GPU_TORCH_INDEX_TIMEOUT`` seconds, default 10) finds the wheel
   there; an unreachable index costs at most that long;
3. else plain ``torch==VERSION`` from pip's configured index, with a warning on stderr.

Outside Linux the PyPI wheels are CPU builds already: plain ``torch==VERSION``.
Usage: ``python scripts/torch_source.py VERSION`` (run by the virtualenv's Python).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.request

# PyTorch's CPU wheel index (https://pytorch.org/get-started/locally/, "CPU" builds).
DEFAULT_INDEX = "https://download.pytorch.org/whl/cpu"
DEFAULT_TIMEOUT_S = 10.0


def local_cpu_wheel(requirement: str) -> bool:
    """Whether pip finds ``requirement`` without any index (find-links and local folders)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        "-q",
        requirement,
    ]
    done = subprocess.run(cmd, capture_output=True, timeout=120, check=False)
    return done.returncode == 0


def index_offers(index: str, version: str, timeout_s: float) -> bool | str:
    """True when the PEP 503 page ``index/torch/`` lists a CPU wheel of ``version`` for this
    Python; else the reason it does not (a string)."""
    url = index.rstrip("/") + "/torch/"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as page:
            text = page.read().decode("utf-8", "replace")
    except (OSError, urllib.error.URLError, ValueError) as err:
        return f"{url} could not be read ({err}; timeout {timeout_s:g} s)"
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    wheel = re.compile(
        rf"torch-{re.escape(version)}(\+|%2B)cpu-{tag}-{tag}-[^\"'<>]*{platform.machine()}"
    )
    if wheel.search(text):
        return True
    return f"{url} lists no torch {version}+cpu wheel for {tag} {platform.machine()}"


def pip_arguments(version: str) -> tuple[list[str], str | None]:
    """The pip arguments for torch, and a warning when only the default build is left."""
    if platform.system() != "Linux":
        return [f"torch=={version}"], None
    cpu = f"torch=={version}+cpu"
    if local_cpu_wheel(cpu):
        return [cpu], None
    index = os.environ.get("OIDN_GPU_TORCH_INDEX", DEFAULT_INDEX)
    if not index:
        return [f"torch=={version}"], None  # asked for pip's own index alone
    timeout_s = float(os.environ.get("OIDN_GPU_TORCH_INDEX_TIMEOUT", DEFAULT_TIMEOUT_S))
    offered = index_offers(index, version, timeout_s)
    if offered is True:
        return ["--extra-index-url", index, cpu], None
    return [f"torch=={version}"], (
        f"warning: no CPU build of PyTorch found: {offered}; installing torch=={version} from "
        "pip's index (on Linux the CUDA build, several GB). Set OIDN_GPU_TORCH_INDEX to a "
        "reachable CPU wheel index, or install a CPU torch into .venv first."
    )


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: torch_source.py VERSION", file=sys.stderr)
        return 2
    args, warning = pip_arguments(argv[0])
    if warning:
        print(warning, file=sys.stderr)
    print("\n".join(args))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
