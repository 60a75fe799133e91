#!/usr/bin/env bash
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1 OIDN_GPU_CUDA_TUNING=off
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
python3 bench/h200_first_call_profile.py cudnn > $OUT/profile_cudnn.txt 2>&1
python3 bench/h200_first_call.py triton > /dev/null 2>&1   # fill the Triton cache
python3 bench/h200_first_call_profile.py triton > $OUT/profile_triton_warm.txt 2>&1
head -3 $OUT/profile_cudnn.txt $OUT/profile_triton_warm.txt
