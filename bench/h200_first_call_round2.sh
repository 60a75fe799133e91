#!/usr/bin/env bash
# The cuda backend's first-call work on the lent H200 (carry [".device"]): the cold-start
# benchmark, new image sizes in a warm process, the steady state, the tests/cuda suite.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 300 python3 -m oidn_gpu bench --backend cuda --cold --cold-runs 3 --json $OUT/cold.json 2>&1 | tee $OUT/cold.log
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 200 python3 bench/h200_first_call.py newsize 2>&1 | grep -v Warn | tee $OUT/newsize.log
timeout 200 python3 -m oidn_gpu bench --backend cuda --size 1080p --runs 100 --json $OUT/bench_1080p.json 2>&1 | grep -E "e2e gpu|gpu net|host wall|compile|memory" | tee $OUT/bench.log
timeout 240 python3 -m pytest -q -p no:cacheprovider -x tests/cuda 2>&1 | tail -15 | tee $OUT/pytest.log
