#!/usr/bin/env bash
# One call on the lent H200 (under 60 s, compiles included): the wgpu backend's autoexposure
# passes alone at 1080p and 4K (GPU timestamps, ms per dispatch): the bins pass with 0, 3, 4
# and 2 (the default) tree levels per invocation in registers, then the scale pass of each
# variant: "stack" (each invocation walks its subtree with an explicit stack) and "levels"
# with 3, 4 (the default) and 5 tree levels per invocation in registers. Every variant must
# print "same" (the first variant's bins and scale bits). Then the whole denoise's "e2e gpu"
# line at 1080p fp16 with the default kernels. Logs go to $OUT. Usage here:
# bash ../shared/tools/device/prepare.sh once, then run with carry [".device"]:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_autoexposure.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 20 python3 bench/autoexposure_passes.py --sizes 1080p 4k --runs 20 --reps 10 \
  > "$OUT/autoexposure_passes.log" 2>&1 || echo "autoexposure passes failed (rc $?)"
grep -vE "^\s*$" "$OUT/autoexposure_passes.log" | tail -n 20
timeout 36 python3 -m oidn_gpu bench --backend wgpu --size 1080p --precision fp16 --runs 20 \
  --json "$OUT/bench_1080p_fp16.json" > "$OUT/bench_1080p_fp16.log" 2>&1 \
  || echo "bench failed (rc $?)"
echo "== bench 1080p fp16"
grep -iE "e2e gpu|e2e|network" "$OUT/bench_1080p_fp16.log" | head -4
