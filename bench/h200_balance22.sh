#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the row tests,
# then the cuda benchmark with the row kernel's rows fitted to the GPU's rounds
# (`row_conv.balance`, default) and without (OIDN_GPU_CUDA_ROW_BALANCE=off), alternating.
#   OUT=$OUT bash bench/h200_balance22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/balance22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 90 python3 -m pytest -q -p no:cacheprovider --tb=short tests/cuda/test_rows.py tests/cuda/test_bridge.py 2>&1 \
  | grep -v "^SKIPPED" | tail -6 | tee -a "$LOG"
bench() {  # name, on|off, then bench arguments
  local name=$1 balance=$2; shift 2
  echo "== $name (OIDN_GPU_CUDA_ROW_BALANCE=$balance) $*" >> "$LOG"
  OIDN_GPU_CUDA_ROW_BALANCE=$balance timeout 80 python3 -m oidn_gpu bench --json "$OUT/$name.json" "$@" 2>&1 \
    | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench 720p_on_a on --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_off_a off --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_on_b on --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_off_b off --backend cuda --size 720p --runs 100 --host-runs 3
bench 1080p_on on --backend cuda --size 1080p --runs 100 --host-runs 3
bench 1080p_off off --backend cuda --size 1080p --runs 100 --host-runs 3
bench fast_on on --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench fast_off off --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench 4k_on on --backend cuda --size 4k --runs 60 --host-runs 3
date -u | tee -a "$LOG"
(cd "$OUT" && tar czf json.tgz *.json && rm -f *.json)  # few files come back
