#!/usr/bin/env bash
# One call on the lent H200 (under 7 minutes, compiles included): the implicit-GEMM conv
# variants (GemmOptions: shared_load pair, prefetch registers and shared, and their
# combinations with shared layouts, tall and wide tiles and K tiles) at 1080p fp16 with
# rt_hdr_alb_nrm, GPU ms per layer for each variant; then the current default, the fastest
# fp16 variant and register prefetch alone at fp32; then the whole denoise (bench) at fp16
# with the current default and with the fastest variant. Every variant should give the
# first configuration's bits ("same" in the tables). Logs and JSON go to $OUT. Usage here:
# bash ../shared/tools/device/prepare.sh once, then run with carry [".device"]:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_wgsl_sweep.sh
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# fp16: every variant of bench/wgsl_sweep/fp16_configs.json, the current default first and
# the riskiest tiles (more registers) last; the JSON is rewritten after each variant, so a
# timeout keeps what ran. Worst case 240 + 90 + 2 x 40 s.
timeout 240 python3 bench/gemm_sweep.py --size 1080p --precision fp16 --runs 20 \
  --configs bench/wgsl_sweep/fp16_configs.json --budget-s 180 \
  --json "$OUT/wgsl_sweep_fp16.json" > "$OUT/wgsl_sweep_fp16.log" 2>&1 \
  || echo "fp16 sweep failed (rc $?)"
grep -vE "^\s*$" "$OUT/wgsl_sweep_fp16.log" | tail -n 90
# the default, the fastest fp16 variant (by network GPU median) and prefetch, at fp32
python3 - "$OUT/wgsl_sweep_fp16.json" /tmp/wgsl_fp32_configs.json /tmp/wgsl_pick.json <<'PY'
import json, os, sys
data = json.load(open(sys.argv[1])) if os.path.exists(sys.argv[1]) else {"results": []}
ok = [r for r in data["results"] if "error" not in r and r.get("net_median_ms")]
default = {"tile_policy": "balanced"}  # the large-GPU default (kernels/gemm.py)
best = min(ok, key=lambda r: r["net_median_ms"])["config"] if ok else default
configs = [default]
# shared_load changes fp16 kernels only; prefetch alone, in case the pick has none
fp32_best = {k: v for k, v in best.items() if k != "shared_load"}
for c in (fp32_best, {"tile_policy": "balanced", "prefetch": "registers"}):
    if c and c not in configs:
        configs.append(c)
json.dump(configs, open(sys.argv[2], "w"))
json.dump(best, open(sys.argv[3], "w"))
print("fastest fp16 variant:", json.dumps(best))
PY
timeout 90 python3 bench/gemm_sweep.py --size 1080p --precision fp32 --runs 20 \
  --configs /tmp/wgsl_fp32_configs.json --budget-s 60 \
  --json "$OUT/wgsl_sweep_fp32.json" > "$OUT/wgsl_sweep_fp32.log" 2>&1 \
  || echo "fp32 sweep failed (rc $?)"
grep -vE "^\s*$" "$OUT/wgsl_sweep_fp32.log" | tail -n 30
# the whole denoise on the GPU, default options and the fastest variant
for name in default pick; do
  gemm=()
  [ "$name" = pick ] && gemm=(--gemm "$(cat /tmp/wgsl_pick.json)")
  timeout 40 python3 -m oidn_gpu bench --backend wgpu --size 1080p --precision fp16 --runs 20 \
    "${gemm[@]}" --json "$OUT/bench_$name.json" > "$OUT/bench_$name.log" 2>&1 \
    || echo "bench $name failed (rc $?)"
  echo "== bench $name"
  grep -iE "e2e|network" "$OUT/bench_$name.log" | head -4
done
