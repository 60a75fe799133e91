#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian/Ubuntu machine and run it.
# wgpu tests run on the GPU if there is one, else on lavapipe (Mesa's CPU Vulkan driver);
# they never skip in CI.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq mesa-vulkan-drivers >/dev/null
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CUDA backend's kernels are tested through Triton's interpreter on the CPU: a CPU
# build of PyTorch is enough (2.13.0 is the one this project's CI machines keep locally;
# an installed torch is kept).
.venv/bin/python -c 'import torch' 2>/dev/null || .venv/bin/python -m pip install -q 'torch==2.13.0'
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/lint-imports  # the import contracts of pyproject.toml
exec .venv/bin/python -m pytest "$@"
