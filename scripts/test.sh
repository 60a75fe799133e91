#!/usr/bin/env bash
# Install everything the test suite needs on a fresh Debian/Ubuntu machine and run it.
# wgpu tests run on the GPU if there is one, else on lavapipe (Mesa's CPU Vulkan driver);
# they never skip in CI.
#
# Environment:
#   PYTHON                        the Python that creates .venv (default python3)
#   OIDN_GPU_TORCH_INDEX          a pip index holding CPU builds of PyTorch (default
#                                 https://download.pytorch.org/whl/cpu; empty: pip's own index)
#   OIDN_GPU_TORCH_INDEX_TIMEOUT  seconds to wait for that index (default 10)
#   OIDN_GPU_APT_WAIT             seconds to wait for another apt/dpkg to finish (default 600)
set -euo pipefail
cd "$(dirname "$0")/.."

TORCH_VERSION=2.13.0  # the build this project's CI machines keep locally

# apt-get, waiting (with a message) while another package manager holds the dpkg lock.
apt_get() {
    local wait="${OIDN_GPU_APT_WAIT:-600}" start=$SECONDS log rc
    log="$(mktemp)"
    while true; do
        rc=0
        $SUDO env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=60 "$@" \
            >"$log" 2>&1 || rc=$?
        if [ "$rc" -eq 0 ]; then rm -f "$log"; return 0; fi
        if grep -qiE 'could not get lock|unable to lock|is another process using it' "$log" \
            && [ $((SECONDS - start)) -lt "$wait" ]; then
            echo "scripts/test.sh: another process holds the apt lock; waiting for it" \
                "($((SECONDS - start)) of ${wait} s, set OIDN_GPU_APT_WAIT to change)" >&2
            sleep 15
            continue
        fi
        cat "$log" >&2
        rm -f "$log"
        echo "scripts/test.sh: 'apt-get $*' failed (exit $rc); install Mesa's lavapipe" \
            "Vulkan driver by hand ('sudo apt-get install mesa-vulkan-drivers') and run" \
            "this script again" >&2
        exit "$rc"
    done
}

if ! ls /usr/share/vulkan/icd.d/lvp_icd*.json >/dev/null 2>&1; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    apt_get update -qq
    apt_get install -y -qq mesa-vulkan-drivers
fi

PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# The CUDA backend's kernels are tested through Triton's interpreter on the CPU: a CPU
# build of PyTorch is enough (scripts/torch_source.py picks it; an installed torch is kept).
if ! .venv/bin/python -c 'import torch' 2>/dev/null; then
    TORCH_LINES="$(.venv/bin/python scripts/torch_source.py "$TORCH_VERSION")"
    mapfile -t TORCH_ARGS <<<"$TORCH_LINES"
    echo "scripts/test.sh: installing ${TORCH_ARGS[*]}" >&2
    .venv/bin/python -m pip install -q "${TORCH_ARGS[@]}"
fi
.venv/bin/python -m pip install -q -e '.[dev]'
.venv/bin/lint-imports  # the import contracts of pyproject.toml
# The formatter and the lint rules of [tool.ruff], on the Python folders alone (ruff also
# formats the code blocks of Markdown files, which stay as written).
.venv/bin/ruff format --check src tests bench scripts
.venv/bin/ruff check src tests bench scripts
.venv/bin/python -m mypy  # the public API and the backend seam ([tool.mypy] in pyproject.toml)
exec .venv/bin/python -m pytest "$@"
