#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network) on commit 4883e24: the
# cuda GPU tests, the autoexposure's launch variants (bench/h200_ae22.py), then the cuda
# benchmark at 720p (twice), 1080p, the fast network and 4K on a fresh Triton cache.
#   OUT=$OUT bash bench/h200_final22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/final22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
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
timeout 150 python3 bench/h200_ae22.py 2>&1 | grep -v Warning | tee -a "$LOG" | tail -8
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/cuda -k "not shipped_tiles_cover" \
  2>&1 | tail -8 | tee -a "$LOG"
date -u | tee -a "$LOG"
