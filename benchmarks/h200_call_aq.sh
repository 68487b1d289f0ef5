#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache: where the h24 ps1 suite's
# time goes, request by request. (1) The suite as in calls AJ/AL, its `request` lines (`kictl bench --timings`).
# (2) The same suite unsandboxed with the parent under cProfile and every worker under cProfile
# (KICTL_WORKER_PROFILE), each profile's top functions printed. (3) The suite with `--time-budget 0.3`.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/aq/base /tmp/w/aq/budget /tmp/w/aq/prof /tmp/w/aq/profout
timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/aq/base 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference\|^precompile'
grep '^request\|^timing' /tmp/w/aq/base/run1.stderr.txt
DEF=gqa_paged_prefill_causal_h24_kv4_d128_ps1
KICTL_WORKER_PROFILE=/tmp/w/aq/prof timeout 200 python3 -m cProfile -o /tmp/w/aq/prof/parent.prof -m kictl bench $DEF \
  --impl implementations/$DEF/reference --impl implementations/$DEF/flashinfer_wrapper --device cuda \
  --out /tmp/w/aq/profout --json --timings --no-sandbox 2>/tmp/w/aq/prof/stderr.txt >/dev/null
grep '^request\|^timing' /tmp/w/aq/prof/stderr.txt
python3 - <<'PY' >/tmp/w/aq/prof/summary.txt 2>&1
import glob, pstats
for path in sorted(glob.glob("/tmp/w/aq/prof/*.prof")):
    print("=====", path)
    stats = pstats.Stats(path)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(30)
PY
timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/aq/budget -- --time-budget 0.3 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
grep '^request\|^timing' /tmp/w/aq/budget/run1.stderr.txt
tar czf $OUT/aq.tgz -C /tmp/w aq 2>/dev/null; ls $OUT
