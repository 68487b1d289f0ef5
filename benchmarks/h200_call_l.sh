#!/usr/bin/env bash
# Issue 16 on the lent H200, carrying .whl .deb .fi_cache (after call J of 2026-12-01, session 3, whose first
# suite_speed run took 105 s and whose box ended before it wrote its phases):
#  1. one suite_speed run of the h24 ps1 suite, with its phases (it now writes them after every run);
#  2. the plain run against --devices all (benchmarks/scale_gpu_check.py), saving the plain run's identity in
#     /tmp/w/l for call K (the Ray leg), which must follow within 30 s while the machine is warm.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/l; mkdir -p $W/suite
echo "== suite"; timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --out $W/suite 2>&1 | tail -n 22
echo "== devices all"; timeout 330 python3 benchmarks/scale_gpu_check.py --out $W --legs plain,devices \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 6
tar czf $OUT/l.tgz -C /tmp/w l 2>/dev/null; ls -la $OUT
