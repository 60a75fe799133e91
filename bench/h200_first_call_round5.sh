#!/usr/bin/env bash
# The cuda backend in a user's hands on the lent H200 (carry [".device"]; .device/main holds
# the landed sources, `git archive HEAD src`): steady state A/B against them in one run,
# the cold-start benchmark, new sizes in a warm process, the tests/cuda suite.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,utilization.gpu --format=csv
B=(python3 -m oidn_gpu bench --backend cuda --runs 100 --host-runs 30)
pick() { grep -E "e2e gpu|gpu net|host wall" | sed "s/^/$1: /"; }
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
for round in 1 2; do
  for size in 1080p 4k; do
    OIDN_GPU_CUDA_TUNING=off PYTHONPATH=$PWD/.device/main/src:$PYTHONPATH "${B[@]}" --size $size 2>&1 | pick "landed-$size-$round" | tee -a $OUT/ab.log
    PYTHONPATH=$PWD/src:$PYTHONPATH "${B[@]}" --size $size --json $OUT/bench_$size.json 2>&1 | pick "now-$size-$round" | tee -a $OUT/ab.log
  done
done
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 300 python3 -m oidn_gpu bench --backend cuda --cold --cold-runs 5 --json $OUT/cold.json 2>&1 | grep -v "^run " | tee $OUT/cold.log
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 200 python3 bench/h200_first_call.py newsize 2>&1 | grep -v Warn | tee $OUT/newsize.log
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/cuda 2>&1 | tail -6 | tee $OUT/pytest.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu --format=csv
