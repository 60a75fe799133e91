#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network) on the final code:
# the cuda benchmark at 720p (twice), 1080p, the fast network and 4K on a fresh Triton cache,
# bench/e2e22_host.py at 720p (the host's enqueue per call, e2e GPU with it hidden), then the
# cuda tests that failed in bench/h200_final22/ (in full), the autoexposure and the repeated
# calls' tests.
#   OUT=$OUT bash bench/h200_final22b.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/final22b.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
python3 -c "import threadpoolctl" 2>&1 | tail -1 | tee -a "$LOG"
bench() {  # name, then bench arguments
  local name=$1; shift
  echo "== $name $*" >> "$LOG"
  timeout 80 python3 -m oidn_gpu bench --json "$OUT/$name.json" "$@" 2>&1 \
    | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench cuda_720p_a --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_1080p --backend cuda --size 1080p --runs 100 --host-runs 3
bench cuda_fast --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench cuda_4k --backend cuda --size 4k --runs 60 --host-runs 3
bench cuda_720p_b --backend cuda --size 720p --runs 100 --host-runs 3
timeout 60 python3 bench/e2e22_host.py 1280x720 2>&1 | grep -v Warning | tee -a "$LOG"
timeout 120 python3 -m pytest -q -p no:cacheprovider --tb=short tests/cuda/test_tensor_io.py tests/cuda/test_repeated_calls.py \
  tests/cuda/test_device_tensors.py tests/cuda/test_pipeline.py -k \
  "comes_back or every_dtype or autoexposure or repeated or replay or described or options" 2>&1 | grep -v "^SKIPPED" | tail -70 \
  | tee -a "$LOG"
date -u | tee -a "$LOG"
