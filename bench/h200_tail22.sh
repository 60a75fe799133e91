#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the network's
# tail in one kernel (the tap sum in the row kernel) against two (`fusion.ROWS_TAP_SUM`):
# bits, the tail step and the network (bench/h200_tail22.py), then the cuda benchmark in
# each form, alternating, on one Triton cache; the row-kernel and fused-tail tests.
#   OUT=$OUT PART=probe|bench|all bash bench/h200_tail22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/tail22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } | tee "$LOG"
PART=${PART:-all}  # probe: the script and the tests; bench: the benchmarks; all: both
if [ "$PART" != bench ]; then
timeout 240 python3 bench/h200_tail22.py "$OUT/tail22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
timeout 150 python3 -m pytest -q -p no:cacheprovider --tb=short tests/cuda/test_rows.py tests/cuda/test_fused.py 2>&1 \
  | grep -v "^SKIPPED" | tail -30 | tee -a "$LOG"
fi
[ "$PART" = probe ] && { date -u | tee -a "$LOG"; exit 0; }
bench() {  # name, form (one|two), then bench arguments
  local name=$1 form=$2; shift 2
  echo "== $name ($form kernel tail) $*" >> "$LOG"
  local flag=True; [ "$form" = two ] && flag=False
  timeout 70 python3 -c "import sys; from oidn_gpu.backends.cuda import fusion; fusion.ROWS_TAP_SUM = $flag; from oidn_gpu.cli.main import main; raise SystemExit(main(sys.argv[1:]))" \
    bench --json "$OUT/$name.json" "$@" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench cuda_720p_one_a one --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_720p_two_a two --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_720p_one_b one --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_720p_two_b two --backend cuda --size 720p --runs 100 --host-runs 3
bench cuda_1080p_one one --backend cuda --size 1080p --runs 100 --host-runs 3
bench cuda_1080p_two two --backend cuda --size 1080p --runs 100 --host-runs 3
bench cuda_fast_one one --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench cuda_fast_two two --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench cuda_4k_one one --backend cuda --size 4k --runs 60 --host-runs 3
date -u | tee -a "$LOG"
