#!/usr/bin/env bash
# Device call 3 of bench/h200_fused3/: the fast network's row tiles (this branch's
# tuning.py, carried in .device/fused22b/overlay/ over the checkout's src/) against the
# checkout's code in one call, alternating (the high network's kernels are unchanged):
#   source .device/setup.sh && OUT=$OUT bash .device/fused22b/overlay/bench/h200_fused3_check.sh
set -u
OUT=${OUT:-/tmp/out}
W=/tmp/f3; mkdir -p $W
OLD=$PWD; NEW=/tmp/new
rm -rf $NEW; mkdir -p $NEW; cp -r src $NEW/; cp -r .device/fused22b/overlay/* $NEW/
. "$(dirname "$0")/h200_fused3_lib.sh"
for tree in NEW OLD; do
  PYTHONPATH=${!tree}/src:/tmp/site python3 -c 'import oidn_gpu; print(oidn_gpu.__file__)'
done > $W/env.txt 2>&1
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } >> $W/env.txt
keep env.txt; cat $W/env.txt
bench fast NEW --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast_old OLD --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast2 NEW --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
date -u
