#!/usr/bin/env bash
# The H200 call of 2026-12-01 ~18:29 UTC (260 s, stopped by its time limit during fast_b_off;
# .device/gaps22 held the changed files of commit 7934321, PDL on every Triton kernel of the
# frame, not kept). Only 8 of its logs came back (the device returns at most 8 files: the
# pytest log, console.txt and the fast and 720p_b logs were left there); they are in
# bench/h200_gaps22/, with console.txt rebuilt from them.
# Programmatic dependent launch (OIDN_GPU_CUDA_PDL=on, the default on compute
# capability 9.0) against launches without it (=off), same code, alternating processes.
# The branch's changed files (.device/gaps22/src, .device/gaps22/tests) overlay a copy of the
# checkout's src in /tmp; run from the repository root:
# (carry .device/gaps22 and pytest's four wheels in .device/whl):
#   OUT=$OUT bash .device/gaps22/bench/h200_gaps22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
R=$PWD G=$PWD/.device/gaps22 O=/tmp/ovl
mkdir -p $O && cp -a src $O/ && cp -a $G/src/. $O/src/ && cp -a $G/tests/. tests/
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .device/whl/*.whl
export PYTHONPATH=$O/src:$PWD:/tmp/site:${PYTHONPATH:-} PYTHONUNBUFFERED=1
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u
  python3 -c "import oidn_gpu, torch, triton; print(oidn_gpu.__file__, torch.__version__, triton.__version__)"
} 2>&1 | tee "$OUT/env.txt"
timeout 100 python3 -m pytest -q -p no:cacheprovider tests/cuda/test_pdl.py 2>&1 | tail -6 \
  | tee "$OUT/pytest_pdl.log"
bench() {  # name, PDL value, then bench arguments
  local name=$1 value=$2; shift 2
  OIDN_GPU_CUDA_PDL=$value timeout 45 python3 -m oidn_gpu bench --backend cuda --host-runs 3 \
    "$@" 2>&1 | grep -v Warning > "$OUT/${name}_$value.log"
  echo "$value $name: $(grep -E '^(gpu net|e2e gpu|compile)' "$OUT/${name}_$value.log" | tr '\n' '|')" \
    | tee -a "$OUT/console.txt"
}
bench 720p_a off --size 720p --runs 100
bench 720p_a on --size 720p --runs 100
bench 1080p_a on --size 1080p --runs 100
bench 1080p_a off --size 1080p --runs 100
bench fast_a off --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast_a on --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench 4k_a on --size 4k --runs 60
bench 4k_a off --size 4k --runs 60
bench 720p_b on --size 720p --runs 100
bench 720p_b off --size 720p --runs 100
bench 1080p_b off --size 1080p --runs 100
bench 1080p_b on --size 1080p --runs 100
bench fast_b on --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
bench fast_b off --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small
timeout 60 python3 -m pytest -q -x -p no:cacheprovider tests/cuda/test_rows.py tests/cuda/test_fused.py \
  2>&1 | tail -6 | tee "$OUT/pytest_rows_fused.log"
