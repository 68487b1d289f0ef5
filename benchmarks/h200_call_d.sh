#!/usr/bin/env bash
# Device call D (issues 11 and 16): where a suite's wall time goes, and the CUPTI timer against ncu.
#  1. the h24 ps1 suite (FlashInfer wrapper + reference, 7 workloads), sandboxed, progress time-stamped,
#     the parent under cProfile;
#  2. gpu_timer_probe.py on every attention workload: CUPTI (spin before, and idle before, as under ncu),
#     events, graph replay; then FlashInfer-Bench's own timer in a process of its own;
#  3. ncu on the small workloads, cache control "all" and "none" (the probe's own 256 MiB flush stays).
# Everything lands in $OUT/d.tgz; the tables on stdout.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/d; mkdir -p $W
stamp() { python3 -u -c 'import sys,time; t0=time.monotonic()
for line in sys.stdin: print(f"{time.monotonic()-t0:7.2f} {line}", end="", flush=True)'; }
P=gqa_paged_prefill_causal_h24_kv4_d128_ps1
echo "== 1. suite"
( time timeout 150 python3 -m cProfile -o $W/suite.prof -m kictl bench $P --impl implementations/$P/flashinfer_wrapper \
    --impl implementations/$P/reference --device cuda --timeout 90 --out $W/suite ) 2>&1 | stamp | tee $W/suite.log | tail -n 40
python3 -c "import pstats; pstats.Stats('$W/suite.prof').sort_stats('cumulative').print_stats(45)" >$W/suite_prof.txt 2>&1
grep -E 'kictl/(bench|executors)|subprocess|select|read' $W/suite_prof.txt | head -30
echo "== 2. probe"
timeout 120 python3 benchmarks/gpu_timer_probe.py --out $W --calls 100 >$W/probe.log 2>&1; tail -n 3 $W/probe.log
timeout 60 python3 benchmarks/gpu_timer_probe.py --fib --out $W --calls 100 >$W/fib.log 2>&1; tail -n 3 $W/fib.log
echo "== 3. ncu"
export PROBE_ONLY=b1_kv73,b1_kv4096,b16x_kv1024,q16_p1,q512_p16,q154_kv154,q1_kv1,q1_kv4096,b4x_q64_kv256,b64x_kv512
for mode in all none; do
  f=$W/ncu.csv; [ $mode = none ] && f=$W/ncu_none.csv
  timeout 110 /usr/local/cuda/bin/ncu --target-processes all --cache-control $mode --clock-control none \
    --metrics gpu__time_duration.sum --csv python3 benchmarks/gpu_timer_probe.py --ncu >$f 2>$W/ncu_$mode.err
  echo "ncu $mode: exit $?"; tail -n 2 $W/ncu_$mode.err
done
PROBE_ONLY= python3 benchmarks/gpu_timer_probe.py --compare $W 2>&1 | tee $W/compare.md
tar czf $OUT/d.tgz -C /tmp/w d 2>/dev/null; ls -la $OUT
