#!/usr/bin/env bash
# Device call B (issues 10 and 11): `kictl bench` itself on the GPU, sandboxed, with the CUPTI timer:
# the honest attention implementations, separate processes on every attention workload (the timer check),
# the cheats, and the probe's per-kernel CUPTI durations. Everything in $OUT; steps are time-boxed.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 110 python3 benchmarks/walls_gpu_check.py --out "$OUT" --part honest --modes sandbox 2>&1 | tail -n 12
mv "$OUT/walls_gpu.txt" "$OUT/walls_honest.txt" 2>/dev/null; rm -f "$OUT/walls_gpu.json"
timeout 240 python3 benchmarks/h200_timer_check.py --out "$OUT" --passes cupti,cupti,cupti,events,graph 2>&1 | tail -n 30
timeout 110 python3 benchmarks/walls_gpu_check.py --out "$OUT" --part cheats 2>&1 | tail -n 40
rm -f "$OUT/walls_gpu.json"
timeout 60 python3 benchmarks/gpu_timer_probe.py --out "$OUT" --calls 30 >/dev/null 2>&1; ls -la "$OUT"
