#!/usr/bin/env bash
# The H200 call of the GEMM tuning (see docs/benchmarks.md): short sweeps of the balanced-tile
# candidates (bench/sweep_final_fp16.json, _fp32.json), then `bench` (network + end to end) at
# 720p/1080p/4K with the fastest configuration of each precision, and the seeds' defaults at
# 1080p for comparison. The recorded run (2026-11-29) also swept a since-removed `code=loops`
# variant (WGSL loops over local accumulator arrays); docs/benchmarks.md has its numbers.
# Usage (device machine): OUT=dir bash bench/h200_final.sh
set -u
B="python3 -m oidn_gpu bench --weights rt_hdr_alb_nrm --runs 20 --warmup 3"
for p in fp16 fp32; do
  python3 bench/gemm_sweep.py --size 1080p --precision $p --runs 20 \
    --configs bench/sweep_final_$p.json --budget-s 40 --json $OUT/final_sweep_$p.json \
    > $OUT/final_sweep_$p.log 2>&1
  tail -n 30 $OUT/final_sweep_$p.log
  best=$(python3 -c "import json,sys; d=json.load(open('$OUT/final_sweep_$p.json')); r=[x for x in d['results'] if x.get('net_median_ms')]; r.sort(key=lambda x: x['net_median_ms']); print(json.dumps(r[0]['config']))")
  echo "best $p: $best"
  for s in 1080p 720p 4k; do
    $B --size $s --precision $p --gemm "$best" --json $OUT/bench_${p}_$s.json > /dev/null 2>&1 || echo "bench $p $s failed"
  done
  $B --size 1080p --precision $p --gemm '{}' --json $OUT/bench_${p}_1080p_seed.json > /dev/null 2>&1 || echo "seed bench $p failed"
done
python3 - <<'PY'
import glob, json, os
for f in sorted(glob.glob(os.environ["OUT"] + "/bench_*.json")):
    d = json.load(open(f))
    print(f"{os.path.basename(f):28} net {d['gpu_median_ms']:.2f} / {d['network_gpu_median_ms']:.2f}"
          f" e2e gpu {d['e2e_gpu_median_ms']:.2f} wall {d['e2e_wall_median_ms']:.2f}"
          f" host {d['host_wall_median_ms']:.2f}")
PY
