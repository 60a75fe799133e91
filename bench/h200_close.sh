#!/usr/bin/env bash
# The closing check on the lent H200 (about 4 minutes): the wgpu host-array path of
# `Denoiser.denoise` at 1080p fp16 and fp32 and 4K fp16 (OIDN's tile plan: two tiles), the
# full-size scenes through `Denoiser` on wgpu (fp16, fp32) and cuda (fp16), and the GPU
# tests that need this machine (tests/cuda, the backend contract suite without the pyoidn
# oracle, the host path, wrapped grids, the fp16 emulation). Needs .device and
# .cudarun/scenes_inputs.npz (`python bench/scenes.py export`). Logs and JSON land in
# $OUT/final.tgz, the scenes' outputs beside it; score them here with `python bench/scenes.py score`.
#   source .device/setup.sh && OUT=$OUT bash bench/h200_close.sh
set -u
OUT=${OUT:-/tmp/out}
work=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
bench() {  # name, then bench arguments
  local name=$1; shift
  timeout 90 python3 -m oidn_gpu bench --backend wgpu --weights rt_hdr_alb_nrm --warmup 3 \
    --top 20 --json "$work/$name.json" "$@" > "$work/$name.log" 2>&1 || echo "bench $name failed"
  echo "== $name"
  grep -E "gpu net|e2e gpu|host wall|of which|Denoiser" "$work/$name.log"
}
bench 1080p_fp16 --size 1080p --precision fp16 --runs 20
bench 4k_fp16 --size 4k --precision fp16 --runs 10
bench 1080p_fp32 --size 1080p --precision fp32 --runs 20
INPUTS=.cudarun/scenes_inputs.npz OUT=$OUT bash bench/h200_scenes.sh  # 3 outputs of ~12 MB
timeout 300 python3 -m pytest -q -p no:cacheprovider -m "not oracle" tests/cuda \
  tests/backends/test_contract.py tests/gpu/test_host_path.py tests/kernels/test_fp16_emulation.py \
  tests/kernels/test_conv_families.py > "$work/pytest.log" 2>&1
tail -n 8 "$work/pytest.log"
tar czf "$OUT/final.tgz" -C "$work" .
