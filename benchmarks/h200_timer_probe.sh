#!/usr/bin/env bash
# One device call: the CUPTI timer against ncu, events and graph replay (benchmarks/gpu_timer_probe.py),
# CUPTI and CUDA inside a bubblewrap sandbox, and the FlashInfer JIT cache saved to $OUT for later calls.
set -u
. benchmarks/h200_setup.sh || exit 1
python3 benchmarks/gpu_timer_probe.py --out "$OUT" 2>&1 | tee "$OUT/probe.log" | tail -n 30
/usr/local/cuda/bin/ncu --target-processes all --cache-control all --clock-control none \
  --metrics gpu__time_duration.sum --csv python3 benchmarks/gpu_timer_probe.py --ncu >"$OUT/ncu.csv" 2>"$OUT/ncu.err"
tail -n 3 "$OUT/ncu.err"
python3 benchmarks/gpu_timer_probe.py --compare "$OUT" | tee "$OUT/compare.md"
nv=(); for d in /dev/nvidia*; do nv+=(--dev-bind "$d" "$d"); done
"$KICTL_BWRAP" --unshare-all --die-with-parent --ro-bind / / --proc /proc --dev /dev "${nv[@]}" \
  --tmpfs /tmp --ro-bind /tmp/site /tmp/site python3 -c "
import os, torch
from kictl.bench.cupti_timer import CuptiCollector
c = CuptiCollector(); c.start()
x = torch.randn(4096, 4096, device='cuda'); y = x @ x; torch.cuda.synchronize()
print('bwrap: pid', os.getpid(), 'procs', sum(p.isdigit() for p in os.listdir('/proc')), 'cupti records', len(c.drain()))
" 2>&1 | tail -n 3
tar czf "$OUT/fi_cache.tgz" -C "$HOME" .cache/flashinfer 2>/dev/null; ls -la "$OUT"
