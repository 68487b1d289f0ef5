#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache. (1) The h24 ps1 suite
# unsandboxed with every worker under cProfile (KICTL_WORKER_PROFILE; each worker now writes its profile at
# every Finish, as call AQ lost the implementations' workers' profiles), each profile's top functions printed.
# (2) The suite sandboxed with this session's defaults (0.3 s budget, gc.freeze after the import).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/ar/base /tmp/w/ar/prof /tmp/w/ar/profout
DEF=gqa_paged_prefill_causal_h24_kv4_d128_ps1
KICTL_WORKER_PROFILE=/tmp/w/ar/prof timeout 200 python3 -m kictl bench $DEF \
  --impl implementations/$DEF/reference --impl implementations/$DEF/flashinfer_wrapper --device cuda \
  --out /tmp/w/ar/profout --json --timings --no-sandbox 2>/tmp/w/ar/prof/stderr.txt >/dev/null
grep '^request\|^timing' /tmp/w/ar/prof/stderr.txt
python3 - <<'PY' >/tmp/w/ar/prof/summary.txt 2>&1
import glob, pstats
for path in sorted(glob.glob("/tmp/w/ar/prof/*.prof")):
    print("=====", path)
    stats = pstats.Stats(path)
    stats.sort_stats("cumulative").print_stats(60)
    stats.sort_stats("tottime").print_stats(30)
PY
ls /tmp/w/ar/prof
timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/ar/base 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
grep '^request\|^timing' /tmp/w/ar/base/run1.stderr.txt
tar czf $OUT/ar.tgz -C /tmp/w ar 2>/dev/null; ls $OUT
