#!/usr/bin/env bash
# The cuda backend's benchmarks with the row kernel's shipped tiles (the default) beside the
# per-layer kernels (OIDN_GPU_CUDA_ROWS=off) in one call, on the lent H200; logs and JSON in
# one tar (the device returns few files); needs no tuning cache. SWEEP=1 first runs
# bench/h200_rows_sweep.py (row tiles of every layer that can take them, written into the
# default tuning cache) and, after the 1080p pair, the shared scenes of scenes.npz with and
# without the row kernel (bench/h200_rows_scenes.py):
#   cd COPY && OUT=$OUT [SWEEP=1] bash bench/h200_rows_final.sh
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/rows_final; mkdir -p $W
keep() { tar -rf "$OUT/logs.tar" -C $W "$@"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch, triton, oidn_gpu
print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
  date -u; } > $W/env.txt 2>&1; keep env.txt; cat $W/env.txt
if [ "${SWEEP:-0}" = 1 ]; then
  timeout 75 python3 bench/h200_rows_sweep.py $W/rows_sweep.json 2>&1 | grep -v Warning \
    > $W/sweep.log
  cp ~/.cache/oidn-gpu/cuda-tuning.json $W/cuda-tuning.json
  keep sweep.log rows_sweep.json cuda-tuning.json
fi
bench() {  # name, then bench arguments (host copies: 10 runs; the GPU rows: --runs)
  local name=$1; shift
  timeout 60 python3 -m oidn_gpu bench --backend cuda --host-runs 10 \
    --json "$W/bench_$name.json" "$@" 2>&1 | grep -v Warning > "$W/bench_$name.log"
  keep "bench_$name.log" "bench_$name.json"
  grep -E "^== |e2e gpu|gpu net|memory|enc_conv0 |enc_conv1 |dec_conv1b" "$W/bench_$name.log"
}
bench 1080p --size 1080p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 1080p_off --size 1080p --runs 100
if [ "${SWEEP:-0}" = 1 ] && [ -f scenes.npz ]; then
  timeout 40 python3 bench/h200_rows_scenes.py scenes.npz "$OUT/scenes_rows.npz" 2>&1 \
    | grep -v Warning > $W/scenes.log
  keep scenes.log; cat $W/scenes.log
fi
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
OIDN_GPU_CUDA_ROWS=off bench 720p_off --size 720p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 4k_off --size 4k --runs 60
OIDN_GPU_CUDA_ROWS=off bench fast_off --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
date -u
[ -f $W/sweep.log ] && grep -v "^compiled" $W/sweep.log | cut -c1-160
