#!/usr/bin/env bash
# One call on the lent H200 after a change to the backends: the wgpu end-to-end time at
# 1080p fp16 (the number the backend seam must not slow down), the CUDA backend through the
# command line (1080p with the plain cuDNN port beside it, 720p, 4K, fast quality), and the
# CUDA tests that need the GPU plus the backend contract suite's non-oracle cases on the
# H200 (Intel OIDN is not installed there). Logs and JSON go to $OUT.
# Usage here: bash ../shared/tools/device/prepare.sh once, then run with carry [".device"]:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_check.sh
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
cp bench/cuda_h200/cuda-tuning.json /tmp/cuda-tuning.json  # tiles tuned on an H200
export OIDN_GPU_CUDA_TUNING=/tmp/cuda-tuning.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
timeout 150 python3 -m oidn_gpu bench --backend wgpu --size 1080p --precision fp16 --runs 20 \
  --json "$OUT/wgpu_1080p_fp16.json" > "$OUT/wgpu.log" 2>&1 || echo "wgpu bench failed"
grep -iE "e2e|network|host|adapter" "$OUT/wgpu.log" | head -12
cuda() {  # name, then bench arguments
  local name=$1; shift
  timeout 120 python3 -m oidn_gpu bench --backend cuda --json "$OUT/cuda_$name.json" "$@" \
    >> "$OUT/cuda.log" 2>&1 || echo "cuda bench $name failed"
}
cuda 1080p --size 1080p --runs 100 --host-runs 30 --baseline
cuda fast --size 1080p --runs 100 --host-runs 10 --weights rt_hdr_alb_nrm_small
cuda 720p --size 720p --runs 100 --host-runs 10
cuda 4k --size 4k --runs 60 --host-runs 10
grep -E "^== |e2e gpu|gpu net|host wall|NumPy|memory" "$OUT/cuda.log" | head -40
timeout 240 python3 -m pytest -q -p no:cacheprovider -m "not oracle" \
  tests/cuda tests/backends/test_contract.py > "$OUT/pytest.log" 2>&1
tail -n 15 "$OUT/pytest.log"
