#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache: a third `kictl bench`
# process of the decode and ps64 suites (after call Q's two) and three of the h24 suite, all on this session's
# code, so that every attention workload has three separate processes of the same kictl.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/r; mkdir -p $W
timeout 250 python3 benchmarks/h200_timer_check.py --out $W --passes cupti \
  --definition gqa_paged_decode_h32_kv8_d128_ps1 --definition gqa_paged_prefill_causal_h20_kv4_d128_ps64 2>&1 | grep exit
timeout 250 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti,cupti \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 12
tar czf $OUT/r.tgz -C /tmp/w r 2>/dev/null; ls -la $OUT
