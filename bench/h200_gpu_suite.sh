#!/usr/bin/env bash
# The GPU correctness suite (tests/gpu, tests/kernels, tests/record) on the lent H200 through
# Vulkan, with a per-test timeout and a JUnit report, so a slow or hanging test shows up by
# name. Intel OIDN (pyoidn) is not on that machine, so the oracle tests stay here.
#
# Prepare once here:   bash ../shared/tools/device/prepare.sh
#                      mkdir -p .devshared/weights && cp ../shared/weights/rt_hdr_alb_nrm_small.tza .devshared/weights/
#                      echo /.devshared/ >> .git/info/exclude
# Run there (carry [".device", ".devshared"], about 7 minutes with 14 workers):
#   source .device/setup.sh && bash bench/h200_gpu_suite.sh
set -u
export OIDN_GPU_SHARED="$PWD/.devshared"
timeout "${SUITE_TIMEOUT_S:-480}" python3 -m pytest -q -n "${WORKERS:-14}" -p no:cacheprovider \
  -p no:benchmark --timeout 90 -rf --tb=short \
  --junitxml="${OUT:-.}/h200_gpu_suite.xml" \
  tests/gpu tests/kernels tests/record --deselect tests/record/test_oracle.py \
  > "${OUT:-.}/h200_gpu_suite.log" 2>&1
echo "pytest exit code $?"
grep -E "^(FAILED|ERROR)|passed|failed" "${OUT:-.}/h200_gpu_suite.log" | tail -40
