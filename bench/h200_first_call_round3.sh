#!/usr/bin/env bash
# A/B of the steady state on the lent H200 (carry [".device"]): shipped tiles, the tiles
# of the 2026-11-30 tuning run, and kernels specialized on image sizes; then a profile of
# the first call in a fresh process.
set -u
OUT=${OUT:-/tmp/out}
source .device/setup.sh
B=(python3 -m oidn_gpu bench --backend cuda --size 1080p --runs 100 --host-runs 30)
pick() { grep -E "e2e gpu|gpu net|host wall" | sed "s/^/$1: /"; }
rm -rf /tmp/srcC && cp -r src /tmp/srcC
python3 - <<'PY'
import re
p = "/tmp/srcC/oidn_gpu/backends/cuda/triton_kernels.py"
s = open(p).read()
s = s.replace("return triton.jit(do_not_specialize=list(sizes))", "return triton.jit")
open(p, "w").write(s)
PY
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
for round in 1 2; do
  PYTHONPATH=$PWD/src:$PYTHONPATH "${B[@]}" 2>&1 | pick "A shipped$round" | tee -a $OUT/ab.log
  OIDN_GPU_CUDA_TUNING=$PWD/bench/h200_first_call/tiles_2026-11-30.json PYTHONPATH=$PWD/src:$PYTHONPATH "${B[@]}" 2>&1 | pick "B old-tiles$round" | tee -a $OUT/ab.log
  PYTHONPATH=/tmp/srcC:$PYTHONPATH "${B[@]}" 2>&1 | pick "C specialized$round" | tee -a $OUT/ab.log
done
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
PYTHONPATH=$PWD/src:$PYTHONPATH python3 bench/h200_first_call_profile.py auto > $OUT/profile_auto.txt 2>&1
head -1 $OUT/profile_auto.txt
