#!/usr/bin/env bash
# One call on the lent H200 (at most 150 s): 1080p e2e GPU fp16 of rt_hdr_alb_nrm with the
# large-GPU GEMM options and each fp16 accumulation (f32: the default; f16-partials: the
# kernels before; f16-chains), then the four shared scenes and the caustics frame at full size
# through every accumulation, wgpu fp32 and (as time allows) the cuda backend's fp16
# (bench/fp16_frames.py). Run with carry [".device"] from the repository root:
#   source .device/setup.sh && cd .device/wgsl && OUT=$OUT bash bench/fp16_h200.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/bench"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import oidn_gpu; print(oidn_gpu.__file__)"
large='"tile_policy": "balanced", "shared_load": "pair", "shared_layout": "padded"'
for acc in f32 f16-partials f16-chains; do
  timeout 30 python3 -m oidn_gpu bench --backend wgpu --size 1080p --precision fp16 --runs 15 \
    --top 20 --gemm "{$large, \"accumulation\": \"$acc\"}" --json "$OUT/bench/bench_$acc.json" \
    > "$OUT/bench/bench_$acc.log" 2>&1 || echo "bench $acc failed (rc $?)"
  echo "== $acc"
  grep -E "compile|gpu net|e2e gpu|Denoiser |dec_conv1a|dec_conv1b" "$OUT/bench/bench_$acc.log"
done
tar -czf "$OUT/bench.tgz" -C "$OUT" bench && rm -rf "$OUT/bench"
# the frames need inputs.npz (15 MB) beside the script: the carried tree must stay under 64 MiB
if [ -f inputs.npz ]; then
  timeout ${FRAMES_S:-60} python3 bench/fp16_frames.py denoise --inputs inputs.npz --out "$OUT" \
    --cuda || echo "frames stopped (rc $?)"
else
  echo "no inputs.npz: the full-size frames were not run"
fi
