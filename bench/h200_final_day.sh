#!/usr/bin/env bash
# Last H200 call of the day (carry [".device"]): the cuda suite on the GPU after the
# runner, seam and fused-tail changes; the cuda benchmark with its public-API rows; temporal
# mode's overhead at 1080p on cuda and wgpu; EXR codec costs on the machine's 16 cores.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 220 python3 -m pytest -q -p no:cacheprovider -x tests/cuda tests/temporal/test_passes.py 2>&1 | tail -25 | tee $OUT/pytest.log
timeout 100 python3 -m oidn_gpu bench --backend cuda --size 1080p --runs 50 --host-runs 40 --json $OUT/bench_1080p.json 2>&1 | tee $OUT/bench_1080p.log | grep -vE "^(enc|dec)_conv"
timeout 90 python3 bench/temporal_overhead.py --backend cuda --backend wgpu --size 1920x1080 --frames 12 --warmup 4 --option cuda:engine=triton --json $OUT/temporal_overhead.json 2>&1 | tee $OUT/temporal_overhead.log
timeout 60 python3 bench/exr_codecs.py --size 1920x1080 --runs 3 --json $OUT/exr_codecs.json 2>&1 | tee $OUT/exr_codecs.log
