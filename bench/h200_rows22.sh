#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the row
# kernel's rows per program against the GPU's waves (bench/h200_rows22.py).
#   OUT=$OUT bash bench/h200_rows22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/rows22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 500 python3 bench/h200_rows22.py "$OUT/rows22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
date -u | tee -a "$LOG"
