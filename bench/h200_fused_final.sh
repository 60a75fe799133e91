#!/usr/bin/env bash
# The cuda backend with its fused tail on the lent H200: the benchmarks of docs/benchmarks.md
# through the command line (default fusion, and OIDN_GPU_CUDA_FUSED=off for the per-layer
# kernels), then shared scenes (bench/h200_fused_scenes.py) if scenes.npz is beside bench/:
#   source .device/setup.sh && cd COPY && OUT=$OUT bash bench/h200_fused_final.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p /tmp/benchjson
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
date -u
bench() {  # name, then bench arguments
  local name=$1; shift
  timeout 200 python3 -m oidn_gpu bench --backend cuda --json "/tmp/benchjson/bench_$name.json" "$@" \
    2>&1 | grep -v Warning | tee -a "$OUT/bench.log"
}
bench 1080p --size 1080p --runs 100 --baseline
OIDN_GPU_CUDA_FUSED=off bench 1080p_layers --size 1080p --runs 100
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
tar -C /tmp/benchjson -cf "$OUT/bench.tar" .
[ -f scenes.npz ] && timeout 150 python3 bench/h200_fused_scenes.py scenes.npz "$OUT/scenes" \
  2>&1 | grep -v Warning | tee "$OUT/scenes.log"
grep -E "^== |e2e gpu|gpu net|memory|dec_conv1b|dec_conv0" "$OUT/bench.log"
