#!/usr/bin/env bash
# Device call F (issues 10, 11, 16): why a sandboxed prefill session stalls (each implementation alone, with
# Python tracebacks dumped every 15 s in kictl and in its sandboxed workers, and the workers' logs kept), the
# probe's timers (for the ncu table of call D), the GPU cheats. Everything lands in $OUT/f.tgz.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/f; mkdir -p $W
cat >/tmp/site/sitecustomize.py <<'PY'
import faulthandler, os
if os.environ.get("KICTL_TEST_DIAG_TB"):
    faulthandler.dump_traceback_later(float(os.environ["KICTL_TEST_DIAG_TB"]), repeat=True)
PY
P=gqa_paged_prefill_causal_h24_kv4_d128_ps1
for impl in reference flashinfer_wrapper; do
  rm -rf /tmp/kictl-bench-*
  s=$(date +%s)
  KICTL_TEST_DIAG_TB=15 timeout 75 python3 -m kictl bench $P --impl implementations/$P/$impl --workload q1_kv1 \
    --device cuda --timeout 45 --out $W/$impl >$W/$impl.log 2>&1
  echo "== $impl: exit $? in $(( $(date +%s) - s )) s"; tail -n 8 $W/$impl.log
  for f in /tmp/kictl-bench-*/logs/*.log; do [ -f "$f" ] && { echo "-- $f"; tail -n 40 "$f"; }; done >$W/$impl.workers.txt
  tail -n 30 $W/$impl.workers.txt
done
echo "== probe"; timeout 150 python3 benchmarks/gpu_timer_probe.py --out $W --calls 50 >$W/probe.log 2>&1; tail -n 2 $W/probe.log | cut -c1-300
echo "== cheats"; timeout 150 python3 benchmarks/walls_gpu_check.py --out $W --part cheats 2>&1 | tail -n 30
tar czf $OUT/f.tgz -C /tmp/w f 2>/dev/null; ls -la $OUT
