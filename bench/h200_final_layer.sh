#!/usr/bin/env bash
# One call on the lent H200 (about 70 s, compiles included; no step starts past 80 s): the final
# layer's variants (GemmOptions final_pixels 1/2/4 output pixels per invocation and
# final_patch linear/padded; 1 pixel in a linear patch is the default kernel) at 1080p
# with rt_hdr_alb_nrm, on top of the large-GPU defaults of each precision:
#   1. every variant in one process (bench/gemm_sweep.py, fp16, then fp32 with fewer): the
#      network's GPU median, dec_conv0's GPU ms and TFLOP/s, and whether the output has the
#      first (today's) variant's bits ("same"; every variant must);
#   2. per fp16 variant, the whole `oidn-gpu bench` (no Denoiser timing): its dec_conv0
#      layer line and its "e2e gpu" line.
# Logs and JSON go to $OUT. Usage here: bash ../shared/tools/device/prepare.sh once, then
# run with carry [".device"]:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_final_layer.sh
set -u
OUT=${OUT:-/tmp/out}
SIZE=${SIZE:-1080p}  # another size only for a dry run elsewhere
mkdir -p "$OUT"
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
DEADLINE_S=80  # stop starting steps past this (SECONDS counts from the script's start)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || true
# the large-GPU defaults (kernels/gemm.py LARGE_GPU_OPTIONS), with the final layer's options
FP16_BASE='"tile_policy": "balanced", "shared_load": "pair", "shared_layout": "padded"'
FP32_BASE='"tile_policy": "balanced", "prefetch": "registers"'
FP16_VARIANTS=("1 linear" "4 padded" "2 padded" "4 linear" "1 padded" "2 linear")  # likeliest first
FP32_VARIANTS=("1 linear" "4 padded" "4 linear" "1 padded")

gemm_json() {  # gemm_json BASE PIXELS PATCH
  echo "{$1, \"final_pixels\": $2, \"final_patch\": \"$3\"}"
}

left() {  # seconds left before the deadline, at most $1
  local rest=$((DEADLINE_S - SECONDS))
  ((rest > $1)) && rest=$1
  echo $((rest > 0 ? rest : 0))
}

sweep() {  # sweep PRECISION BASE TIMEOUT VARIANT...
  local precision=$1 base=$2 limit
  limit=$(left "$3")
  shift 3
  if ((limit < 10)); then
    echo "== $precision sweep skipped: ${limit} s left"
    return
  fi
  local configs="$OUT/final_$precision.configs.json" sep="" v
  {
    echo "["
    for v in "$@"; do
      set -- $v
      echo "$sep$(gemm_json "$base" "$1" "$2")"
      sep=","
    done
    echo "]"
  } > "$configs"
  timeout "$limit" python3 bench/gemm_sweep.py --size "$SIZE" --precision "$precision" --runs 20 \
    --configs "$configs" --budget-s $((limit - 8)) --json "$OUT/final_$precision.json" \
    > "$OUT/final_$precision.log" 2>&1 || echo "$precision sweep failed (rc $?)"
  echo "== $precision: network and dec_conv0 per variant (bits against the first)"
  python3 - "$OUT/final_$precision.json" <<'PY'
import json, os, sys
if not os.path.exists(sys.argv[1]):
    sys.exit("no results")
for r in json.load(open(sys.argv[1]))["results"]:
    c = r["config"]
    name = f"final_pixels={c['final_pixels']} final_patch={c['final_patch']}"
    if "error" in r:
        print(f"{name:<36} error {r['error']}")
        continue
    d = r["layers"].get("dec_conv0", {})
    bits = "same" if r["identical_to_first"] else f"DIFF {r['max_abs_diff_vs_first']:.3g}"
    print(
        f"{name:<36} net {r['net_median_ms']:7.3f} ms  dec_conv0 {d.get('median_ms', 0):6.3f} ms"
        f" {d.get('tflops', 0):5.1f} TFLOP/s  {d.get('kernel', '?')}  bits {bits}"
    )
PY
}

sweep fp16 "$FP16_BASE" 30 "${FP16_VARIANTS[@]}"
sweep fp32 "$FP32_BASE" 18 "${FP32_VARIANTS[@]}"

# the whole denoise on the GPU per fp16 variant (the layer table lists every layer)
for v in "${FP16_VARIANTS[@]}"; do
  set -- $v
  name="final_pixels=$1 final_patch=$2"
  limit=$(left 15)
  if ((limit < 8)); then
    echo "== bench $name skipped: ${limit} s left"
    continue
  fi
  log="$OUT/bench_fp16_px$1_$2.log"
  timeout "$limit" python3 -m oidn_gpu bench --backend wgpu --size "$SIZE" --precision fp16 \
    --runs 20 --top 40 --no-denoiser --gemm "$(gemm_json "$FP16_BASE" "$1" "$2")" \
    --json "$OUT/bench_fp16_px$1_$2.json" > "$log" 2>&1 || echo "bench $name failed (rc $?)"
  echo "== bench $name"
  grep -E "^(dec_conv0 |e2e gpu|gpu net)" "$log"
done
echo "total ${SECONDS} s"
