#!/usr/bin/env bash
# The row kernel on the lent H200 (one call): tile sweep and accuracy (bench/h200_rows_sweep.py,
# which writes the fastest tiles into the default tuning cache), then the command-line
# benchmarks with the row kernel and without it (OIDN_GPU_CUDA_ROWS=off, the previous default),
# then the shared scenes (bench/h200_rows_scenes.py, after the 1080p pair) if scenes.npz is beside bench/:
#   source .device/setup.sh && cd COPY && OUT=$OUT bash bench/h200_rows.sh
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch, triton, oidn_gpu; print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
date -u
timeout 120 python3 bench/h200_rows_sweep.py "$OUT/rows_sweep.json" 2>&1 | grep -v Warning | tee "$OUT/sweep.log"
cp ~/.cache/oidn-gpu/cuda-tuning.json "$OUT/cuda-tuning.json" 2>/dev/null
bench() {  # name, then bench arguments (host copies: 10 runs, the GPU rows are 100)
  local name=$1; shift
  timeout 100 python3 -m oidn_gpu bench --backend cuda --host-runs 10 --json "$OUT/bench_$name.json" "$@" \
    2>&1 | grep -v Warning | tee -a "$OUT/bench.log"
}
OIDN_GPU_CUDA_ROWS=off bench 1080p_off --size 1080p --runs 100
bench 1080p --size 1080p --runs 100
[ -f scenes.npz ] && timeout 60 python3 bench/h200_rows_scenes.py scenes.npz "$OUT/scenes_rows.npz" \
  2>&1 | grep -v Warning | tee "$OUT/scenes.log"
OIDN_GPU_CUDA_ROWS=off bench 720p_off --size 720p --runs 100
bench 720p --size 720p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 4k_off --size 4k --runs 60
bench 4k --size 4k --runs 60
OIDN_GPU_CUDA_ROWS=off bench fast_off --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
date -u
grep -E "^== |e2e gpu|gpu net|memory|enc_conv0|enc_conv1 |dec_conv1b" "$OUT/bench.log"
