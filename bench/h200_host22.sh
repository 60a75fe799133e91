#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm): where a 720p render loop's frame
# waits on the host (bench/h200_host22.py), then the cuda benchmark at 720p twice.
#   OUT=$OUT bash bench/h200_host22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/host22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 200 python3 bench/h200_host22.py "$OUT/host22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
for run in a b; do
  echo "== cuda_720p_$run --backend cuda --size 720p --runs 100 --host-runs 3" >> "$LOG"
  timeout 80 python3 -m oidn_gpu bench --json "$OUT/cuda_720p_$run.json" --backend cuda --size 720p \
    --runs 100 --host-runs 3 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
done
date -u | tee -a "$LOG"
