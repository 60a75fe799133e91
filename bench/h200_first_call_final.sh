#!/usr/bin/env bash
# The cuda backend in a user's hands on the lent H200, last run of the day (carry
# [".device"]): the steady state with the public API's rows (NumPy, torch tensors,
# oidn_gpu.denoise per call), the cold-start benchmark, a per-frame log of the cuDNN
# bridge, then the tests/cuda suite.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 150 python3 -m oidn_gpu bench --backend cuda --size 1080p --runs 100 --json $OUT/bench_1080p.json 2>&1 | tee $OUT/bench_1080p.log | grep -vE "^(enc|dec)_conv"
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 150 python3 -m oidn_gpu bench --backend cuda --cold --cold-runs 5 --json $OUT/cold.json 2>&1 | grep -v "^run " | tee $OUT/cold.log
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 60 python3 bench/h200_first_call.py bridge_log > $OUT/bridge_log.txt 2>&1
grep -E "Triton|frame" $OUT/bridge_log.txt | awk 'NR<=4 || /Triton kernels/ {print} END {print}'
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tail -8 | tee $OUT/pytest.log
