#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the row kernel's
# next input row asked for early (`row_conv.ROW_PREFETCH` 0, 1, 2; bench/h200_prefetch22.py),
# then the cuda benchmark with the fastest form at 720p against form 0, alternating, on one
# Triton cache, and at 1080p and on the fast network; the row-kernel tests.
#   OUT=$OUT bash bench/h200_prefetch22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/prefetch22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 260 python3 bench/h200_prefetch22.py "$OUT/prefetch22.json" "$OUT/best.txt" 2>&1 | grep -v Warning | tee -a "$LOG"
BEST=$(cat "$OUT/best.txt" 2>/dev/null || echo 0)
bench() {  # name, form, then bench arguments
  local name=$1 form=$2; shift 2
  echo "== $name (ROW_PREFETCH=$form) $*" >> "$LOG"
  timeout 60 python3 -c "import sys; from oidn_gpu.backends.cuda import row_conv; row_conv.ROW_PREFETCH = $form; from oidn_gpu.cli.main import main; raise SystemExit(main(sys.argv[1:]))" \
    bench --json "$OUT/$name.json" "$@" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
if [ "$BEST" != 0 ]; then
  bench cuda_720p_best_a "$BEST" --backend cuda --size 720p --runs 100 --host-runs 3
  bench cuda_720p_zero_a 0 --backend cuda --size 720p --runs 100 --host-runs 3
  bench cuda_720p_best_b "$BEST" --backend cuda --size 720p --runs 100 --host-runs 3
  bench cuda_720p_zero_b 0 --backend cuda --size 720p --runs 100 --host-runs 3
  bench cuda_1080p_best "$BEST" --backend cuda --size 1080p --runs 100 --host-runs 3
  bench cuda_1080p_zero 0 --backend cuda --size 1080p --runs 100 --host-runs 3
  bench cuda_fast_best "$BEST" --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
  bench cuda_fast_zero 0 --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
fi
date -u | tee -a "$LOG"
