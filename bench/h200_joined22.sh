#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the row
# kernel's input rows with joined accumulators against three (bench/h200_joined22.py),
# the row tests with them, then the cuda benchmark with each (`row_conv.JOINED`).
#   OUT=$OUT bash bench/h200_joined22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/joined22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 240 python3 bench/h200_joined22.py "$OUT/joined22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
timeout 60 python3 -c "import sys, pytest; from oidn_gpu.backends.cuda import row_conv; row_conv.JOINED = True; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '--tb=short', 'tests/cuda/test_rows.py']))" 2>&1 \
  | grep -v "^SKIPPED" | tail -6 | tee -a "$LOG"
bench() {  # name, stages (False|True), then bench arguments
  local name=$1 stages=$2; shift 2
  echo "== $name (JOINED=$stages) $*" >> "$LOG"
  timeout 60 python3 -c "import sys; from oidn_gpu.backends.cuda import row_conv; row_conv.JOINED = $stages; from oidn_gpu.cli.main import main; raise SystemExit(main(sys.argv[1:]))" \
    bench --json "$OUT/$name.json" "$@" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
for s in ${BENCH_FORMS:-False True False True}; do
  bench 720p_$s $s --backend cuda --size 720p --runs 100 --host-runs 3
done
for s in False True; do
  bench 1080p_$s $s --backend cuda --size 1080p --runs 100 --host-runs 3
  bench fast_$s $s --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
done
date -u | tee -a "$LOG"
(cd "$OUT" && tar czf json.tgz *.json && rm -f *.json)  # few files come back
