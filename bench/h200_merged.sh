#!/usr/bin/env bash
# One H200 call (carry [".device"]) on the code of the day's merges: the cuda tests that
# need a GPU for the new parts (row kernel, temporal session, pinned results, device
# tensors, fused tail), the cuda benchmark (1080p with and without the row kernel, 720p,
# 4K, fast), and the temporal overhead of both device sessions at 1080p.
#   source .device/setup.sh && OUT=$OUT bash bench/h200_merged.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/env.log"
date -u | tee -a "$OUT/env.log"
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_rows.py \
  tests/cuda/test_temporal_session.py tests/cuda/test_temporal_kernels.py \
  tests/cuda/test_host_results.py tests/cuda/test_device_tensors.py tests/cuda/test_fused.py \
  2>&1 | tail -15 | tee "$OUT/pytest.log"
bench() {  # name, then bench arguments
  local name=$1; shift
  timeout 60 python3 -m oidn_gpu bench --backend cuda --host-runs 10 \
    --json "$OUT/bench_$name.json" "$@" 2>&1 | grep -v Warning > "$OUT/bench_$name.log"
  echo "== $name"; grep -E "e2e gpu|gpu net|memory|api " "$OUT/bench_$name.log"
}
bench 1080p --size 1080p --runs 100
OIDN_GPU_CUDA_ROWS=off bench 1080p_off --size 1080p --runs 100
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
timeout 120 python3 bench/temporal_overhead.py --backend cuda --backend wgpu \
  --size 1920x1080 --frames 14 --warmup 4 --option cuda:engine=triton --check-frames 4 \
  --json "$OUT/temporal_overhead.json" 2>&1 | tee "$OUT/temporal_overhead.log" | tail -12
