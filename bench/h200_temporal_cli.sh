#!/usr/bin/env bash
# One H200 call: the cuda temporal overhead at 1080p (bench/temporal_overhead.py: per-frame
# and temporal, `denoise` and `denoise_many`, the kernels' split) and the command line's
# --temporal against per-frame denoising on 16 1080p EXR frames (bench/temporal_cli.py),
# the reprojection kernel against the one of $OTHER_KERNELS (bench/temporal_gather_ab.py),
# then the cuda temporal kernel tests on the GPU. Carry .device (setup.sh, gl, whl) and
# .payload (OpenImageIO: python3 scripts/device_payload.py build).
#   source .device/setup.sh && OUT=$OUT bash bench/h200_temporal_cli.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
site=/tmp/oiio-site
python3 scripts/device_payload.py unpack "${PAYLOAD:-.payload}" "$site" > /dev/null || exit 1
export PYTHONPATH=$PWD/src:$PWD:$site:$PYTHONPATH
export HOME=$(mktemp -d) TRITON_CACHE_DIR=$(mktemp -d)
nvidia-smi -L; nvidia-smi --query-gpu=driver_version --format=csv,noheader
python3 -c "import oidn_gpu, torch, triton, OpenImageIO; print(oidn_gpu.__file__, 'torch',
torch.__version__, 'triton', triton.__version__, 'OpenImageIO', OpenImageIO.__version__)"
date -u
timeout 75 python3 bench/temporal_overhead.py --backend cuda --size 1920x1080 --frames 14 \
  --warmup 4 --option cuda:engine=triton --check-frames 4 2>&1 | grep -v Warning \
  | tail -8 | tee "$OUT/temporal_overhead.log"
timeout 80 python3 bench/temporal_cli.py --size 1920x1080 --frames 16 \
  --json "$OUT/temporal_cli.json" -- --backend cuda --engine triton 2>&1 \
  | grep -v Warning | tee "$OUT/temporal_cli.log"
timeout 25 python3 bench/temporal_gather_ab.py --other "$OTHER_KERNELS" 2>&1 \
  | grep -v Warning | tee "$OUT/gather_ab.log"
timeout 30 python3 -m pytest -q -x -p no:cacheprovider tests/cuda/test_temporal_kernels.py \
  2>&1 | tail -4 | tee "$OUT/pytest.log"
