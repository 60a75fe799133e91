#!/usr/bin/env bash
# The full-size test scenes on the lent H200, through `oidn_gpu.Denoiser` (hdr, autoexposure):
# wgpu fp16 and fp32, cuda fp16. Outputs come back as .npz and are scored here against Intel
# OIDN 2.5.1 CPU with `python bench/scenes.py score`.
# Needs scenes_inputs.npz (`python bench/scenes.py export ... --to .cudarun/scenes_inputs.npz`)
# carried beside .device:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_scenes.sh
set -u
OUT=${OUT:-/tmp/out}
INPUTS=${INPUTS:-.cudarun/scenes_inputs.npz}
[ -f bench/cuda_h200/cuda-tuning.json ] && cp bench/cuda_h200/cuda-tuning.json /tmp/cuda-tuning.json \
  && export OIDN_GPU_CUDA_TUNING=/tmp/cuda-tuning.json
scenes() {  # name, then denoise arguments
  local name=$1; shift
  timeout 150 python3 bench/scenes.py denoise --inputs "$INPUTS" --out "$OUT/scenes_$name.npz" "$@" \
    > "$OUT/scenes_$name.log" 2>&1 || { echo "scenes $name failed"; tail -5 "$OUT/scenes_$name.log"; }
}
scenes wgpu_fp16 --backend wgpu --precision fp16
scenes wgpu_fp32 --backend wgpu --precision fp32
scenes cuda_fp16 --backend cuda --precision fp16
