#!/bin/bash
# Render-farm throughput (frames per minute) on a GPU machine without a package index:
# the single-process loop of `oidn-gpu denoise` and the farm with 1 and 2 Ray actors on
# one GPU, for the wgpu and the cuda backend, 1080p frames.
#
# Needs .device/ (bash ../shared/tools/device/prepare.sh: wgpu, the Vulkan loader) and
# .payload/ (python3 scripts/device_payload.py build: Ray, OpenImageIO) in the checkout.
# Run in the project root:
#   source .device/setup.sh && OUT=$OUT bash bench/h200_farm.sh
# It writes farm_<backend>_<size>.json (bench/farm_throughput.py's report) and
# h200_farm.log to $OUT. A backend that fails or overruns its time does not stop the other.
# FARM_SIZE (1920x1080; several sizes separated by spaces), FARM_AUX (an EXR compression:
# half EXRs with albedo and normal layers), FARM_LAYOUTS, FARM_LIMIT (160 s per backend), FARM_SECONDS (30: the single process's run; the farm rows take
# about as long each), FARM_BACKENDS ("wgpu cuda") and PAYLOAD (.payload) change the
# defaults.
set -u
out=${OUT:-/tmp/h200-farm}
mkdir -p "$out"
exec > >(tee -a "$out/h200_farm.log") 2>&1
started=$(date +%s)
site=/tmp/ray-site
python3 scripts/device_payload.py unpack "${PAYLOAD:-.payload}" "$site" || exit 1
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
# Ray stays on this machine: loopback addresses, no usage statistics (see bench's docstring)
export RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 RAY_USAGE_STATS_ENABLED=0
# the cuda backend runs its shipped tiles (tuning is opt-in: OIDN_GPU_CUDA_TUNING)
gpus=$(nvidia-smi -L | grep -c '^GPU')
nvidia-smi -L
python3 - <<'EOF'
import OpenImageIO
import ray

print(f"ray {ray.__version__} from {ray.__file__}; OpenImageIO {OpenImageIO.__version__}")
try:
    import torch

    print(f"torch {torch.__version__}: {torch.cuda.device_count()} CUDA device(s)")
    import wgpu

    print(f"wgpu {wgpu.__version__}: {wgpu.gpu.request_adapter_sync().summary}")
except Exception as err:  # reported; that backend's rows then fail on their own
    print(f"{type(err).__name__}: {err}")
EOF
size=${FARM_SIZE:-1920x1080}
# one worker on a GPU, two sharing it, and one per GPU where there are several
layouts=${FARM_LAYOUTS:-1gpu,2x0.5gpu}
[ -z "${FARM_LAYOUTS:-}" ] && [ "$gpus" -ge 2 ] && layouts="$layouts,${gpus}gpu"
limit=${FARM_LIMIT:-160}
seconds=${FARM_SECONDS:-30}
aux=${FARM_AUX:+--aux $FARM_AUX}
for size in $size; do
for backend in ${FARM_BACKENDS:-wgpu cuda}; do
    echo "== $backend $size ${FARM_AUX:-color only}: $(date -u +%H:%M:%S)"
    # 160 s per backend (FARM_LIMIT) keeps the whole script within 6 minutes
    timeout -k 10 "$limit" python3 bench/farm_throughput.py --backend "$backend" --size "$size" \
        --distinct 8 --frames 5000 --target-seconds "$seconds" --num-gpus "$gpus" \
        --layouts "$layouts" $aux --json "$out/farm_${backend}_$size.json"
    status=$?
    [ $status -eq 0 ] || echo "== $backend: farm_throughput.py exited with $status"
done
done
echo "== done in $(($(date +%s) - started)) s"
