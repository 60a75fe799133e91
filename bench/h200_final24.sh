#!/usr/bin/env bash
# One H200 call (carry .device, the weights of rt_hdr_alb_nrm and its fast network, and
# .payload/frames.npz from `bench/fp16_frames.py export --oidn`) on the merged code: the GPU
# tests of the decoders' parity form and of repeated cuda calls, the cuda benchmark at 720p
# (twice), 1080p (twice), 4K and the fast network (twice), the wgpu fp16 benchmark at 1080p
# with the large-GPU default, and the full-size frames through every wgpu fp16 sum and the
# cuda backend, scored against Intel OIDN CPU's outputs carried in frames.npz.
#   source .device/setup.sh && OUT=$OUT bash bench/h200_final24.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/final.log
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_conv_parity.py \
  tests/gpu/test_decoder_parity.py tests/cuda/test_repeated_calls.py 2>&1 | tail -6 | tee -a "$LOG"
bench() {  # name, then bench arguments
  local name=$1; shift
  echo "== $name $*" >> "$LOG"
  timeout 90 python3 -m oidn_gpu bench --json "$OUT/$name.json" "$@" 2>&1 \
    | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench cuda_720p_a --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_1080p_a --backend cuda --size 1080p --runs 100 --host-runs 3
bench cuda_fast_a --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench cuda_4k --backend cuda --size 4k --runs 60 --host-runs 3
bench cuda_720p_b --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_1080p_b --backend cuda --size 1080p --runs 100 --host-runs 3
bench cuda_fast_b --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench wgpu_1080p --backend wgpu --precision fp16 --size 1080p --runs 30
echo "== fp16_frames" >> "$LOG"
timeout 200 python3 bench/fp16_frames.py denoise --inputs .payload/frames.npz --out /tmp/frames \
  --cuda 2>&1 | grep -v Warning | tee -a "$LOG"
date -u | tee -a "$LOG"
