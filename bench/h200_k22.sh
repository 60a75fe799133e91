#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm): dec_conv1a's K steps per source and
# a frame graph launched without torch (bench/h200_k22.py).
#   OUT=$OUT bash bench/h200_k22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/k22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 400 python3 bench/h200_k22.py "$OUT/k22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
date -u | tee -a "$LOG"
