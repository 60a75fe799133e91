#!/usr/bin/env bash
# Fresh-process first-call probe on the lent H200: each run a new process with empty
# Triton and tuning caches unless said otherwise. Writes logs to $OUT.
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
fresh() { export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d); }
run() { timeout 400 python3 bench/h200_first_call.py "$@" 2>&1 | grep -v Warning | tee -a "$OUT/first_call.log"; }
fresh; run cudnn
fresh; run cudnn
fresh; OIDN_GPU_CUDA_TUNING=off run triton
OIDN_GPU_CUDA_TUNING=off run triton   # same caches: warm
fresh; OIDN_GPU_CUDA_TUNING=off run bridge
fresh; OIDN_GPU_CUDA_TUNING=$OUT/tuning.json run tune
