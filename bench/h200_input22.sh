#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the input
# pass's channels joined against selected (bench/h200_input22.py), its tests, then the cuda
# benchmark with each (`runner.INPUT_JOIN`), alternating, on one Triton cache.
#   OUT=$OUT bash bench/h200_input22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/input22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 120 python3 bench/h200_input22.py "$OUT/input22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
timeout 100 python3 -m pytest -q -p no:cacheprovider --tb=short tests/cuda/test_input_pass.py tests/cuda/test_pipeline.py 2>&1 \
  | grep -v "^SKIPPED" | tail -8 | tee -a "$LOG"
bench() {  # name, join (True|False), then bench arguments
  local name=$1 join=$2; shift 2
  echo "== $name (INPUT_JOIN=$join) $*" >> "$LOG"
  timeout 60 python3 -c "import sys; from oidn_gpu.backends.cuda import runner; runner.INPUT_JOIN = $join; from oidn_gpu.cli.main import main; raise SystemExit(main(sys.argv[1:]))" \
    bench --json "$OUT/$name.json" "$@" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
bench 720p_join_a True --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_select_a False --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_join_b True --backend cuda --size 720p --runs 100 --host-runs 3
bench 720p_select_b False --backend cuda --size 720p --runs 100 --host-runs 3
bench 1080p_join True --backend cuda --size 1080p --runs 100 --host-runs 3
bench 1080p_select False --backend cuda --size 1080p --runs 100 --host-runs 3
bench fast_join True --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench fast_select False --backend cuda --size 1080p --runs 100 --weights rt_hdr_alb_nrm_small --host-runs 3
bench 4k_join True --backend cuda --size 4k --runs 60 --host-runs 3
bench 4k_select False --backend cuda --size 4k --runs 60 --host-runs 3
date -u | tee -a "$LOG"
(cd "$OUT" && tar czf json.tgz *.json && rm -f *.json)  # few files come back
