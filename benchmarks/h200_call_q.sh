#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache: two more `kictl bench`
# processes of the decode and ps64 suites (FlashInfer wrapper, every workload, CUPTI), so that each attention
# workload has three separate processes (h24 had three in calls G and H; decode and ps64 one, in call G).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/q; mkdir -p $W
timeout 540 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti \
  --definition gqa_paged_decode_h32_kv8_d128_ps1 --definition gqa_paged_prefill_causal_h20_kv4_d128_ps64 2>&1 | tail -n 30
tar czf $OUT/q.tgz -C /tmp/w q 2>/dev/null; ls -la $OUT
