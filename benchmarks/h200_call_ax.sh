#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache: three separate `kictl bench`
# processes per attention definition (FlashInfer wrapper, every workload, sandboxed, CUPTI) on this session's final
# code (0.3 s budget, inputs drawn on the GPU, outputs packed through pinned memory). The table against call D's ncu figures is
# made afterwards with `h200_timer_check.py --table` (RESULTS.md).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/ax; mkdir -p $W
for d in gqa_paged_prefill_causal_h24_kv4_d128_ps1 gqa_paged_prefill_causal_h20_kv4_d128_ps64 gqa_paged_decode_h32_kv8_d128_ps1; do
  timeout 170 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti,cupti --definition $d 2>&1 | grep -E "exit|no result"
  tar czf $OUT/ax.tgz -C /tmp/w ax 2>/dev/null
done
ls $OUT
