#!/usr/bin/env bash
# One H200 call: the wgpu fp16 accumulations on the full-size shared scenes and the
# caustics frame (bench/fp16_frames.py denoise; inputs exported here into
# .device/lead/inputs.npz), the cuda temporal overhead at 1080p, and the render farm on
# one GPU at 1080p and 4K with 1, 2 and 4 workers sharing it (half EXRs with albedo and
# normal, ZIP; bench/h200_farm.sh). Carry .device/{setup.sh,gl,whl,lead}, .payload and the
# weights file the command needs.
#   source .device/setup.sh && OUT=$OUT bash bench/h200_farm_fp16.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/fp16"
export PYTHONPATH=$PWD/src:$PWD:$PYTHONPATH
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
timeout 150 python3 bench/fp16_frames.py denoise --inputs .device/lead/inputs.npz \
  --out "$OUT/fp16" --cuda 2>&1 | grep -v Warning | tee "$OUT/fp16_frames.log"
rm -f "$OUT/fp16/frames_wgpu_fp16_f32.npz"  # the device returns 8 files: fp32 is the one needed
timeout 75 python3 bench/temporal_overhead.py --backend cuda --size 1920x1080 --frames 14 \
  --warmup 4 --option cuda:engine=triton --check-frames 4 2>&1 | grep -v Warning \
  | tail -8 | tee "$OUT/temporal_cuda.log"
FARM_BACKENDS=cuda FARM_SIZE="1920x1080 3840x2160" FARM_AUX=zip \
  FARM_LAYOUTS=1gpu,2x0.5gpu,4x0.25gpu FARM_SECONDS=12 FARM_LIMIT=120 PAYLOAD=.payload \
  OUT=$OUT/farm bash bench/h200_farm.sh 2>&1 | grep -v Warning | tail -30
