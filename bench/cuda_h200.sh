#!/usr/bin/env bash
# The CUDA backend on the lent H200 in one call: benchmarks (1080p with the cuDNN baseline,
# 720p, 4K, fast quality), the tests/cuda suite and the shared scenes. Run from a copy of the
# repository that holds src/, tests/, bench/, shared/weights/ (rt_hdr_alb_nrm*.tza),
# scenes_inputs.npz (bench/scenes.py export) and whl/ (pytest and its dependencies);
# writes logs and JSON to $OUT.
set -u
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1
export OIDN_GPU_SHARED=$PWD/shared OIDN_GPU_CUDA_TUNING=$OUT/cuda-tuning.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
bench() {  # name, then bench arguments
  local name=$1; shift
  timeout 300 python3 -m oidn_gpu bench --backend cuda --json "$OUT/bench_$name.json" "$@" \
    2>&1 | tee -a "$OUT/bench.log"
}
bench 1080p --size 1080p --runs 100 --baseline
bench fast --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tee "$OUT/pytest.log" | tail -15
timeout 120 python3 bench/scenes.py denoise --backend cuda --inputs scenes_inputs.npz \
  --out "$OUT/scenes_out.npz" 2>&1 | tail -5
bench 720p --size 720p --runs 100
bench 4k --size 4k --runs 60
grep -E "^== |e2e gpu|gpu net|host wall|memory|transfers" "$OUT/bench.log"
