#!/usr/bin/env bash
# The CUDA backend's NumPy path on the lent H200 in one call: the host <-> GPU copy strategies
# alone (bench/cuda_host_copies.py), the 1080p and 720p bench (NumPy in/out median and its
# stages) and the NumPy tests of tests/cuda. Run from a copy of the repository
# with shared/weights/, bench/cuda_h200/cuda-tuning.json (tiles tuned on an H200) and whl/
# (pytest and its dependencies); writes logs and JSON to $OUT.
set -u
OUT=${OUT:-/tmp/out}
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/src:$PWD PYTHONUNBUFFERED=1
cp bench/cuda_h200/cuda-tuning.json /tmp/cuda-tuning.json
export OIDN_GPU_SHARED=$PWD/shared OIDN_GPU_CUDA_TUNING=/tmp/cuda-tuning.json
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
nproc
timeout 50 python3 bench/cuda_host_copies.py --size 1080p --runs 40 \
  --json "$OUT/host_copies_1080p.json" 2>&1 | tee "$OUT/host_copies.log"
timeout 100 python3 -m oidn_gpu.backends.cuda.bench --size 1080p --runs 30 --host-runs 50 \
  --json "$OUT/bench_1080p.json" 2>&1 | tee "$OUT/bench.log" | grep -vE "^(enc|dec|pool)"
timeout 60 python3 -m oidn_gpu.backends.cuda.bench --size 720p --runs 30 --host-runs 50 \
  --json "$OUT/bench_720p.json" 2>&1 | tee -a "$OUT/bench.log" | grep -E "^== |host|e2e"
timeout 40 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_pipeline.py \
  -k "layouts or numpy or bad_images" 2>&1 | tee "$OUT/pytest.log" | tail -4
