#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the GPU tests of
# the input pass's two parts and of whole cuda denoises, the aux input pass beside the
# autoexposure against one after the other (bench/h200_beside22.py), then the cuda benchmark
# at 720p (twice), 1080p, the fast network and 4K on a fresh Triton cache.
#   OUT=$OUT bash bench/h200_cuda22.sh
# It ran on commit 433db4c (the aux input pass beside the autoexposure, on by default, not
# kept): its benchmark rows are of that form.
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/cuda22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 170 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_input_parts.py \
  tests/cuda/test_pipeline.py tests/cuda/test_bridge.py tests/cuda/test_repeated_calls.py \
  tests/cuda/test_denoiser_tensors.py 2>&1 | tail -8 | tee -a "$LOG"
timeout 150 python3 bench/h200_beside22.py 720p,1080p,fast,4k 2>&1 | grep -v Warning \
  | tee -a "$LOG"
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
date -u | tee -a "$LOG"
