#!/usr/bin/env bash
# One H200 call (carry as bench/h200_final24.sh): the full-size frames through the parity
# form with other f16 sums (the first and final layers in f32), scored against Intel OIDN
# CPU's outputs in frames.npz, and the wgpu fp16 benchmark of each at 1080p.
#   source .device/setup.sh && OUT=$OUT bash bench/h200_sums24.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/sums.log
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
export HOME=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 200 python3 bench/fp16_frames.py denoise --inputs .payload/frames.npz --out /tmp/frames \
  --only wgpu_fp16_f32 wgpu_fp16_default wgpu_fp16_parity_f16-pairs_f32-ends \
  wgpu_fp16_parity_f16-lanes_f32-ends wgpu_fp16_parity_f16-chains_f32-ends 2>&1 \
  | grep -v Warning | tee -a "$LOG"
gemm() {  # accumulation: the large-GPU tiles, parity form, first and final layers in f32
  printf '{"tile_policy": "balanced", "shared_load": "pair", "shared_layout": "padded",
    "decoder_form": "parity", "accumulation": "%s", "input_accumulation": "f32",
    "final_accumulation": "f32", "final_patch": "padded", "final_pixels": 2}' "$1"
}
for acc in default f16-pairs f16-lanes f16-chains default; do
  echo "== wgpu fp16 1080p $acc" | tee -a "$LOG"
  if [ $acc = default ]; then extra=(); else extra=(--gemm "$(gemm $acc)"); fi
  timeout 90 python3 -m oidn_gpu bench --backend wgpu --precision fp16 --size 1080p --runs 30 \
    --no-denoiser "${extra[@]}" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(e2e gpu|gpu net)" "$LOG" | tail -2
done
date -u | tee -a "$LOG"
