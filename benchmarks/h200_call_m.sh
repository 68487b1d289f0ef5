#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 3 of 2026-12-01), carrying .whl .deb .fi_cache:
#  1. what one timed call costs the harness, step by step (benchmarks/gpu_call_cost.py);
#  2. the --devices all leg again after the fix of the expected protocol (call L's plain run identity is
#     carried in benchmarks/gpu_expected/, untracked), and its identity left in /tmp/w/m for call K.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/m; mkdir -p $W /tmp/w/l && cp benchmarks/gpu_expected/identity-*.json /tmp/w/l/
echo "== call cost"; timeout 90 python3 benchmarks/gpu_call_cost.py 2>&1 | tee $W/call_cost.md | tail -n 14
echo "== devices all"; timeout 330 python3 benchmarks/scale_gpu_check.py --out $W --legs devices --expected /tmp/w/l \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 4
tar czf $OUT/m.tgz -C /tmp/w m 2>/dev/null; ls -la $OUT
