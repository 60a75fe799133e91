#!/usr/bin/env bash
# One H200 call (carry the weights of rt_hdr_alb_nrm and its fast network): the per-layer
# conv kernel's loads through L1 against L2 only (bench/h200_cache22.py), then the cuda
# benchmark with each (`executor.CONV_CACHE`), alternating.
#   OUT=$OUT bash bench/h200_cache22.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
LOG=$OUT/cache22.log
export PYTHONPATH=$PWD/src:$PWD:${PYTHONPATH:-}
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u; } | tee "$LOG"
timeout 300 python3 bench/h200_cache22.py "$OUT/cache22.json" 2>&1 | grep -v Warning | tee -a "$LOG"
bench() {  # name, form, then bench arguments
  local name=$1 form=$2; shift 2
  echo "== $name (CONV_CACHE=$form) $*" >> "$LOG"
  timeout 60 python3 -c "import sys; from oidn_gpu.backends.cuda import executor; executor.CONV_CACHE = $form; from oidn_gpu.cli.main import main; raise SystemExit(main(sys.argv[1:]))" \
    bench --json "$OUT/$name.json" "$@" 2>&1 | grep -v Warning >> "$LOG"
  grep -E "^(== |e2e gpu|gpu net)" "$LOG" | tail -3
}
for f in ${FORMS:-"('','')" "('.ca','.ca')" "('','')" "('.ca','.ca')"}; do
  bench "720p_$(echo $f | tr -dc 'ca')" "$f" --backend cuda --size 720p --runs 100 --host-runs 3
done
date -u | tee -a "$LOG"
(cd "$OUT" && tar czf json.tgz *.json && rm -f *.json)  # few files come back
