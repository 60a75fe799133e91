#!/usr/bin/env bash
# Device call 2 of bench/h200_fused3/: this branch's changed files (carried in
# .device/fused22b/overlay/, laid over the checkout's src/, tests/ and bench/ into /tmp/new)
# against the checkout's code (the previous default), on a fresh machine:
#   source .device/setup.sh && OUT=$OUT bash .device/fused22b/overlay/bench/h200_fused3_final.sh
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/f3; mkdir -p $W
OLD=$PWD; NEW=/tmp/new
rm -rf $NEW; mkdir -p $NEW; cp -r src tests bench $NEW/; cp -r .device/fused22b/overlay/* $NEW/
. "$(dirname "$0")/h200_fused3_lib.sh"
for tree in NEW OLD; do
  PYTHONPATH=${!tree}/src:/tmp/site python3 -c 'import torch, triton, oidn_gpu
print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
done > $W/env.txt 2>&1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; date -u; } \
  >> $W/env.txt 2>&1; keep env.txt; cat $W/env.txt
(cd $NEW && PYTHONPATH=$NEW/src:$NEW:/tmp/site timeout 150 python3 -m pytest -q \
  -p no:cacheprovider tests/cuda/test_rows.py tests/cuda/test_fused.py 2>&1 | tail -6) \
  > $W/pytest.log; keep pytest.log; cat $W/pytest.log
PYTHONPATH=$NEW/src:/tmp/site timeout 60 python3 $NEW/bench/h200_fused3_tapsum.py \
  $W/tapsum.json 2>&1 | grep -v Warning > $W/tapsum.log; keep tapsum.log tapsum.json
bench 1080p NEW --size 1080p --runs 100
bench 1080p_old OLD --size 1080p --runs 100
bench fast NEW --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast_old OLD --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench 720p NEW --size 720p --runs 100
bench 720p_old OLD --size 720p --runs 100
bench 4k NEW --size 4k --runs 60
bench 4k_old OLD --size 4k --runs 60
date -u
cut -c1-150 $W/tapsum.log
