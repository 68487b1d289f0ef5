#!/usr/bin/env bash
# Device call E (issues 11, 10, 14): three separate `kictl bench` processes on every attention workload
# (CUPTI, sandboxed), the GPU cheats of issues 10 and 11, and the reruns of the bundled H200 FlashInfer runs.
# Everything lands in $OUT/e.tgz; the tables on stdout.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/e; mkdir -p $W
echo "== reruns"; timeout 170 python3 benchmarks/h200_rerun.py --out $W --timeout 120 2>&1 | tail -n 14
echo "== cheats"; timeout 170 python3 benchmarks/walls_gpu_check.py --out $W --part cheats 2>&1 | tail -n 40
echo "== spread"; timeout 250 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti,cupti 2>&1 | tail -n 30
tar czf $OUT/e.tgz -C /tmp/w e 2>/dev/null; ls -la $OUT
