#!/usr/bin/env bash
# Device call A (issues 10 and 11): the CUPTI timer against ncu on every bundled attention workload
# (benchmarks/gpu_timer_probe.py, stand-alone), then the walls on the GPU (benchmarks/walls_gpu_check.py:
# FlashInfer's plan()-in-setup wrapper, torch and the reference sandboxed, the cheats). Everything in $OUT.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
{
  timeout 200 python3 benchmarks/gpu_timer_probe.py --out "$OUT" --calls 100 2>&1 | tail -n 4
  timeout 200 /usr/local/cuda/bin/ncu --target-processes all --cache-control all --clock-control none \
    --metrics gpu__time_duration.sum --csv python3 benchmarks/gpu_timer_probe.py --ncu >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
  tail -n 3 "$OUT/ncu.err"
  python3 benchmarks/gpu_timer_probe.py --compare "$OUT"
} >"$OUT/probe.log" 2>&1
tail -n 25 "$OUT/probe.log"
rm -f "$OUT/ncu.err"
timeout 240 python3 benchmarks/walls_gpu_check.py --out "$OUT" >"$OUT/run.log" 2>&1
tail -n 40 "$OUT/run.log"
tar czf "$OUT/fi_cache.tgz" -C "$HOME" .cache/flashinfer 2>/dev/null
ls -la "$OUT"
