#!/usr/bin/env bash
# One call on the lent H200: the wgpu backend's host-array path ("NumPy in, NumPy out") at
# 1080p and 4K, network fp16 (and 1080p fp32), for GpuDenoiser.denoise and the public
# Denoiser.denoise, with the host breakdown (upload, submit, GPU wait, readback, the rest).
# A/B of the upload strategy (OIDN_GPU_UPLOAD=mapped, the default, against queue writes) and
# of the copy threads (OIDN_GPU_COPY_THREADS=1 against the default), and float16 host images.
# Targets: Denoiser.denoise on host arrays <= 20 ms at 1080p (GPU ~12.6 ms), 4K <= 80 ms.
# Takes under 4 minutes. Logs, JSON and summary.json go to $OUT.
# Usage here: bash ../shared/tools/device/prepare.sh once, then run with carry [".device"]:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_wgpu_host.sh
set -u
OUT=${OUT:-/tmp/out}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
run() {  # name, environment assignments..., then -- and the bench arguments
  local name=$1; shift
  local env=()
  while [ "$1" != "--" ]; do env+=("$1"); shift; done
  shift
  env "${env[@]}" timeout 75 python3 -m oidn_gpu bench --backend wgpu --weights rt_hdr_alb_nrm \
    --warmup 3 --top 0 --json "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1 \
    || echo "bench $name failed (see $name.log)"
  echo "== $name"
  grep -E "e2e gpu|host wall|of which|host images|Denoiser" "$OUT/$name.log"
}
python3 - <<'PY'  # the host's copy and float32 -> float16 rounding speed (1080p RGB)
import time, numpy as np
from oidn_gpu.image.host_copy import copy_threads, parallel_copyto
src = np.random.default_rng(0).random((1080, 1920, 3), dtype=np.float32)
for dtype in (np.float32, np.float16):
    dst = np.empty(src.shape, dtype)
    for threads in (1, copy_threads()):
        times = []
        for _ in range(5):
            start = time.perf_counter()
            parallel_copyto(dst, src, threads=threads)
            times.append((time.perf_counter() - start) * 1e3)
        print(f"copy into {np.dtype(dtype).name}, {threads} thread(s): {min(times):.2f} ms")
PY
run 1080p_fp16_mapped OIDN_GPU_UPLOAD=mapped -- --size 1080p --precision fp16 --runs 15
run 1080p_fp16_queue OIDN_GPU_UPLOAD=queue -- --size 1080p --precision fp16 --runs 15
run 4k_fp16_mapped OIDN_GPU_UPLOAD=mapped -- --size 4k --precision fp16 --runs 10
run 4k_fp16_queue OIDN_GPU_UPLOAD=queue -- --size 4k --precision fp16 --runs 10
run 1080p_fp16_mapped_1thread OIDN_GPU_UPLOAD=mapped OIDN_GPU_COPY_THREADS=1 -- \
  --size 1080p --precision fp16 --runs 15
run 1080p_fp16_half_images OIDN_GPU_UPLOAD=mapped -- --size 1080p --precision fp16 --runs 15 \
  --host-dtype float16
run 1080p_fp32_mapped OIDN_GPU_UPLOAD=mapped -- --size 1080p --precision fp32 --runs 15
python3 - <<'PY'
import glob, json, os
keys = ("e2e_gpu_median_ms", "host_wall_median_ms", "host_upload_median_ms",
        "host_wait_median_ms", "host_readback_median_ms", "facade_wall_median_ms",
        "facade_output_wall_median_ms", "facade_upload_median_ms", "facade_wait_median_ms",
        "facade_readback_median_ms", "facade_overhead_median_ms", "facade_tiles")
summary = {}
for path in sorted(glob.glob(os.path.join(os.environ.get("OUT", "/tmp/out"), "*.json"))):
    name = os.path.basename(path)[:-5]
    if name == "summary":
        continue
    data = json.load(open(path))
    summary[name] = {k: data.get(k) for k in keys}
    row = " ".join(f"{k.replace('_median_ms', '')}={v:.2f}" if isinstance(v, float) else
                   f"{k}={v}" for k, v in summary[name].items())
    print(f"{name:28} {row}")
json.dump(summary, open(os.path.join(os.environ.get("OUT", "/tmp/out"), "summary.json"), "w"),
          indent=1)
PY
