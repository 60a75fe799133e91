#!/usr/bin/env bash
# Device call 1 of bench/h200_fused3/: where the e2e GPU time goes, and tile sweeps
# (bench/h200_fused3_probe.py), on a fresh machine (empty Triton cache):
#   cd COPY && OUT=$OUT bash bench/h200_fused3_probe.sh
set -u
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, triton, oidn_gpu
print("torch", torch.__version__, "triton", triton.__version__, oidn_gpu.__file__)'
  date -u; } 2>&1 | tee "$OUT/env.txt"
timeout 320 python3 bench/h200_fused3_probe.py "$OUT/probe.json" 2>&1 | grep -v Warning \
  > "$OUT/probe.log"
date -u | tee -a "$OUT/env.txt"
grep -v '^{"net"' "$OUT/probe.log" | grep -v '^ *"' | head -20
