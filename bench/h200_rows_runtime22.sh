#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the row tests,
# then the cuda benchmark with the row kernel's rows a run-time argument (as shipped) and,
# at 720p alternating with it, a copy of the tree with the rows a compile-time constant
# (bench/h200_rows_const22.patch, the form bench/h200_balance22 measured).
#   OUT=$OUT bash bench/h200_rows_runtime22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/rows_runtime22.log
CONST=$(mktemp -d)
cp -r src "$CONST/src" && (P=$PWD/bench/h200_rows_const22.patch; cd "$CONST" && { patch -s -p1 < "$P" || git apply "$P"; }) || echo "PATCH FAILED"
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; git log -1 --format=%h 2>/dev/null; } | tee "$LOG"
PYTHONPATH=$PWD/src:$PWD timeout 100 python3 -m pytest -q -p no:cacheprovider --tb=short \
  tests/cuda/test_rows.py tests/cuda/test_bridge.py 2>&1 | grep -v "^SKIPPED" | tail -6 | tee -a "$LOG"
bench() {  # name, source tree, then bench arguments
  local name=$1 tree=$2; shift 2
  echo "== $name ($tree) $*" >> "$LOG"
  PYTHONPATH=$tree/src:$PWD timeout 80 python3 -m oidn_gpu bench --json "$OUT/$name.json" "$@" 2>&1 \
    | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench 720p_runtime_a "$PWD" --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_const_a "$CONST" --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_runtime_b "$PWD" --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_const_b "$CONST" --backend cuda --size 720p --runs 100 --host-runs 3
bench 1080p_runtime "$PWD" --backend cuda --size 1080p --runs 100 --host-runs 3
bench fast_runtime "$PWD" --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench 4k_runtime "$PWD" --backend cuda --size 4k --runs 60 --host-runs 3
bench 1080p_const "$CONST" --backend cuda --size 1080p --runs 100 --host-runs 3
date -u | tee -a "$LOG"
(cd "$OUT" && tar czf json.tgz *.json && rm -f *.json)  # few files come back
