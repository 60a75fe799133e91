#!/usr/bin/env bash
# The row kernel on the lent H200, second call: the sweep with weights held on chip
# (bench/h200_rows_sweep.py writes the fastest tiles into the default tuning cache), the
# command-line benchmarks with the row kernel (and at 1080p without it, OIDN_GPU_CUDA_ROWS=off),
# the shared scenes. Logs go into one tar (the device returns few files):
#   cd COPY && OUT=$OUT bash bench/h200_rows2.sh
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/rows2; mkdir -p $W
keep() { tar -rf "$OUT/logs.tar" -C $W "$@"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch, triton, oidn_gpu; print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
  date -u; } > $W/env.txt 2>&1; keep env.txt; cat $W/env.txt
timeout 75 python3 bench/h200_rows_sweep.py $W/rows_sweep.json 2>&1 | grep -v Warning > $W/sweep.log
cp ~/.cache/oidn-gpu/cuda-tuning.json $W/cuda-tuning.json; keep sweep.log rows_sweep.json cuda-tuning.json
bench() {  # name, then bench arguments (host copies: 10 runs; the GPU rows: --runs)
  local name=$1; shift
  timeout 60 python3 -m oidn_gpu bench --backend cuda --host-runs 10 --json "$W/bench_$name.json" "$@" \
    2>&1 | grep -v Warning > "$W/bench_$name.log"; keep "bench_$name.log" "bench_$name.json"
  grep -E "^== |e2e gpu|gpu net|memory|enc_conv0 |enc_conv1 |dec_conv1b|dec_conv2b " "$W/bench_$name.log"
}
bench 1080p --size 1080p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 1080p_off --size 1080p --runs 100
timeout 40 python3 bench/h200_rows_scenes.py scenes.npz "$OUT/scenes_rows.npz" 2>&1 \
  | grep -v Warning > $W/scenes.log; keep scenes.log; cat $W/scenes.log
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
date -u
grep -v "^compiled" $W/sweep.log | cut -c1-160
