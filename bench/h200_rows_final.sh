#!/usr/bin/env bash
# The cuda backend's benchmarks with the row kernel's shipped tiles (the default) beside the
# per-layer kernels (OIDN_GPU_CUDA_ROWS=off) in one call, on the lent H200; logs and JSON in
# one tar (the device returns few files); needs no tuning cache:
#   cd COPY && OUT=$OUT bash bench/h200_rows_final.sh
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/rows_final; mkdir -p $W
keep() { tar -rf "$OUT/logs.tar" -C $W "$@"; }
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
  python3 -c 'import torch, triton, oidn_gpu; print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
  date -u; } > $W/env.txt 2>&1; keep env.txt; cat $W/env.txt
bench() {  # name, then bench arguments (host copies: 10 runs; the GPU rows: --runs)
  local name=$1; shift
  timeout 60 python3 -m oidn_gpu bench --backend cuda --host-runs 10 --json "$W/bench_$name.json" "$@" \
    2>&1 | grep -v Warning > "$W/bench_$name.log"; keep "bench_$name.log" "bench_$name.json"
  grep -E "^== |e2e gpu|gpu net|memory|enc_conv0 |enc_conv1 |dec_conv1b" "$W/bench_$name.log"
}
bench 1080p --size 1080p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 1080p_off --size 1080p --runs 100
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
OIDN_GPU_CUDA_ROWS=off bench 720p_off --size 720p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 4k_off --size 4k --runs 60
date -u
