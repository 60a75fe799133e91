#!/bin/bash
# One H200 call: main's code (old, .device/e2e22_old) and this branch (new, .device/e2e22)
# alternating, `python -m oidn_gpu bench --backend cuda` per size; then the host enqueue and
# autoexposure probe (bench/e2e22_host.py) of both; then the cuda tests of this branch.
# Run from the repository root after `source .device/setup.sh`; everything goes to $OUT/e2e22.log.
LOG=$OUT/e2e22.log
ROOT=$PWD
say() { echo "$@" | tee -a "$LOG"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} 2>&1 | tee -a "$LOG"
run() {  # run TREE LABEL ARGS...: one bench of one tree
  local tree=$1 label=$2; shift 2
  say "=== $tree $label: bench --backend cuda $*"
  (cd "$ROOT/.device/$tree" && PYTHONPATH=$ROOT/.device/$tree/src:$PYTHONPATH \
    python3 -m oidn_gpu bench --backend cuda --host-runs 3 "$@") 2>&1 | tee -a "$LOG" \
    | grep -E "gpu net|e2e gpu|dec_conv1b\+dec_conv0|enc_conv0 " | sed "s/^/$tree $label: /" >> "$OUT/console.txt"
}
for tree in e2e22_old e2e22; do
  (cd .device/$tree && PYTHONPATH=$ROOT/.device/$tree/src:$PYTHONPATH python3 -c \
    "import oidn_gpu; print('$tree', oidn_gpu.__file__)") 2>&1 | tee -a "$LOG"
done
run e2e22_old 720p --size 1280x720 --runs 100
run e2e22 720p --size 1280x720 --runs 100
run e2e22_old fast --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
run e2e22 fast --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
run e2e22_old 1080p --size 1920x1080 --runs 100
run e2e22 1080p --size 1920x1080 --runs 100
run e2e22_old 4k --size 3840x2160 --runs 60
run e2e22 4k --size 3840x2160 --runs 60
for tree in e2e22_old e2e22; do
  extra=""; [ $tree = e2e22 ] && extra=--autoexposure
  say "=== $tree host probe 720p"
  (cd .device/$tree && PYTHONPATH=$ROOT/.device/$tree/src:$PYTHONPATH \
    python3 "$ROOT/.device/e2e22/bench/e2e22_host.py" 1280x720 $extra) 2>&1 | tee -a "$LOG"
done
run e2e22 720p_b --size 1280x720 --runs 100
run e2e22_old 720p_b --size 1280x720 --runs 100
say "=== e2e22 pytest"
(cd .device/e2e22 && PYTHONPATH=$ROOT/.device/e2e22/src:$PYTHONPATH timeout 150 python3 -m pytest -q \
  -p no:cacheprovider tests/cuda/test_repeated_calls.py tests/cuda/test_autoexposure_launch.py \
  tests/cuda/test_device.py tests/cuda/test_device_tensors.py \
  "tests/cuda/test_bridge.py::test_a_new_image_size_compiles_nothing") 2>&1 | tail -30 | tee -a "$LOG"
say "=== done"; date -u | tee -a "$LOG"
