#!/usr/bin/env bash
# The cuda backend in a user's hands on the lent H200 (carry [".device"]): the cold-start
# benchmark (fresh processes, empty caches), new sizes in a warm process, the tests/cuda
# suite, the steady state at 720p, 1080p, 4K and fast quality.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 300 python3 -m oidn_gpu bench --backend cuda --cold --cold-runs 5 --json $OUT/cold.json 2>&1 | grep -v "^run " | tee $OUT/cold.log
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 200 python3 bench/h200_first_call.py newsize 2>&1 | grep -v Warn | tee $OUT/newsize.log
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tail -6 | tee $OUT/pytest.log
for size in 1080p 720p 4k; do
  timeout 200 python3 -m oidn_gpu bench --backend cuda --size $size --runs 100 --json $OUT/bench_$size.json 2>&1 | grep -E "e2e gpu|gpu net|host wall" | sed "s/^/$size /" | tee -a $OUT/bench.log
done
timeout 200 python3 -m oidn_gpu bench --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small 2>&1 | grep -E "e2e gpu|gpu net|host wall" | sed "s/^/fast /" | tee -a $OUT/bench.log
