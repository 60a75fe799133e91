#!/usr/bin/env bash
# One H200 call: the cuda temporal overhead at 1080p (bench/temporal_overhead.py: per-frame
# and temporal, `denoise` and `denoise_many`, the kernels' split) and the command line's
# --temporal against per-frame denoising on 16 1080p EXR frames (bench/temporal_cli.py),
# the reprojection kernel against the one of $OTHER_KERNELS (bench/temporal_gather_ab.py),
# on the GPU. OIIO_SITE: a folder holding OpenImageIO (the command line's EXR files).
# Run in a copy of the project's tree (src, bench, scripts):
#   OIIO_SITE=/tmp/oiio OTHER_KERNELS=old/temporal_kernels.py OUT=$OUT bash bench/h200_temporal_cli.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/src:$PWD:${OIIO_SITE:-}${PYTHONPATH:+:$PYTHONPATH}
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
