#!/usr/bin/env bash
# The GPU correctness suite (tests/gpu, tests/kernels, tests/record) on the lent H200 through
# Vulkan, with a per-test timeout and a JUnit report, so a slow or hanging test shows up by
# name. Intel OIDN (pyoidn) is not on that machine, so the oracle tests stay here.
#
# The tests need only the repository (tests/data) and the package's weights.
# Prepare once here:   bash ../shared/tools/device/prepare.sh
# Run there (carry [".device"]):
#   source .device/setup.sh && bash bench/h200_gpu_suite.sh [pytest args...]
# Every test's outcome is logged as it ends (-v), a hung test is named and its stack dumped by
# pytest-timeout's thread method, and the whole run is interrupted (SIGINT, so the report is
# still written) before the device's per-command limit.
set -u
out="${OUT:-.}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(tests/gpu tests/kernels tests/record --deselect tests/record/test_oracle.py)
fi
timeout -s INT -k 30 "${SUITE_TIMEOUT_S:-500}" python3 -m pytest -v -n "${WORKERS:-8}" \
  -p no:cacheprovider -p no:benchmark --timeout "${TEST_TIMEOUT_S:-120}" --timeout-method thread \
  -rfE --tb=short --durations=25 --junitxml="$out/h200_gpu_suite.xml" \
  "${targets[@]}" > "$out/h200_gpu_suite.log" 2>&1
echo "pytest exit code $?"
grep -E "^(FAILED|ERROR)|Timeout|passed|failed" "$out/h200_gpu_suite.log" | tail -40
sed -n '/slowest/,/^=.*short test summary/p' "$out/h200_gpu_suite.log" | head -30
