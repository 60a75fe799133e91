#!/usr/bin/env bash
# The fused network tail on the lent H200 in one call: tile sweep, accuracy, benchmarks
# (bench/h200_fused.py), then the shared scenes per fusion mode and precision (scored here
# with `python bench/scenes.py score`). Needs scenes_inputs.npz beside bench/
# (`python bench/scenes.py export --scenes .../testdata/scenes --to scenes_inputs.npz`):
#   source .device/setup.sh && cd COPY && OUT=$OUT bash bench/h200_fused.sh
set -u
OUT=${OUT:-/tmp/out}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
timeout 330 python3 bench/h200_fused.py 2>&1 | grep -v Warning | tee "$OUT/log.txt"
scenes() {  # name, fusion, then denoise arguments
  local name=$1 fusion=$2; shift 2
  OIDN_GPU_CUDA_FUSED=$fusion timeout 90 python3 bench/scenes.py denoise --inputs scenes_inputs.npz \
    --out "$OUT/scenes_$name.npz" --backend cuda --engine triton "$@" > "$OUT/scenes_$name.log" 2>&1 \
    || { echo "scenes $name failed"; tail -5 "$OUT/scenes_$name.log"; }
}
scenes fp16_project project --precision fp16
scenes fp16_layers off --precision fp16
scenes bf16_project project --precision bf16
scenes bf16_layers off --precision bf16
ls -la "$OUT"
