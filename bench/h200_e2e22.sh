#!/bin/bash
# One H200 call: main's code (old: the checkout's own src, main at d16169c) and this branch
# (new: .device/e2e22, its src) alternating, `python -m oidn_gpu bench --backend cuda` per
# size; then the host enqueue and autoexposure probe (bench/e2e22_host.py) of both; then the
# cuda tests of this branch. Run from the repository root; pytest comes from the wheels in
# .device/e2e22/whl (no wgpu needed). Everything goes to $OUT/e2e22.log.
LOG=$OUT/e2e22.log
ROOT=$PWD
NEW=$ROOT/.device/e2e22
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "$NEW"/whl/*.whl >> "$LOG" 2>&1
export PYTHONUNBUFFERED=1
say() { echo "$@" | tee -a "$LOG"; }
tree_dir() { if [ "$1" = old ]; then echo "$ROOT"; else echo "$NEW"; fi; }
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
} 2>&1 | tee -a "$LOG"
run() {  # run TREE LABEL ARGS...: one bench of one tree
  local tree=$1 label=$2 dir; shift 2; dir=$(tree_dir "$tree")
  say "=== $tree $label: bench --backend cuda $*"
  (cd "$dir" && PYTHONPATH=$dir/src:/tmp/site python3 -m oidn_gpu bench --backend cuda \
    --host-runs 3 "$@") 2>&1 | tee -a "$LOG" \
    | grep -E "gpu net|e2e gpu|dec_conv1b\+dec_conv0" | sed "s/^/$tree $label: /" >> "$OUT/console.txt"
}
for tree in old new; do
  dir=$(tree_dir $tree)
  (cd "$dir" && PYTHONPATH=$dir/src:/tmp/site python3 -c \
    "import oidn_gpu; print('$tree', oidn_gpu.__file__)") 2>&1 | tee -a "$LOG"
done
run old 720p --size 1280x720 --runs 100
run new 720p --size 1280x720 --runs 100
run old fast --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
run new fast --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
run old 1080p --size 1920x1080 --runs 100
run new 1080p --size 1920x1080 --runs 100
run old 4k --size 3840x2160 --runs 60
run new 4k --size 3840x2160 --runs 60
for tree in old new; do
  dir=$(tree_dir $tree); extra=""; [ $tree = new ] && extra=--autoexposure
  say "=== $tree host probe 720p"
  (cd "$dir" && PYTHONPATH=$dir/src:/tmp/site python3 "$NEW/bench/e2e22_host.py" 1280x720 \
    $extra) 2>&1 | tee -a "$LOG"
done
run new 720p_b --size 1280x720 --runs 100
run old 720p_b --size 1280x720 --runs 100
run new fast_b --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
run old fast_b --size 1920x1080 --runs 100 --weights rt_hdr_alb_nrm_small
say "=== new pytest"
(cd "$NEW" && PYTHONPATH=$NEW/src:/tmp/site timeout 150 python3 -m pytest -q -p no:cacheprovider \
  tests/cuda/test_repeated_calls.py tests/cuda/test_autoexposure_launch.py \
  tests/cuda/test_device.py tests/cuda/test_device_tensors.py \
  "tests/cuda/test_bridge.py::test_a_new_image_size_compiles_nothing") 2>&1 | tail -30 | tee -a "$LOG"
say "=== done"; date -u | tee -a "$LOG"
