#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache: the plain run and
# `--devices all` of the h24 ps1 suite on the session's final code (benchmarks/scale_gpu_check.py); call AW, on
# the same warm machine right after, runs the Ray leg against this call's plain run.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/av; mkdir -p $W
timeout 400 python3 benchmarks/scale_gpu_check.py --out $W --legs plain,devices \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 8
tar czf $OUT/av.tgz -C /tmp/w av 2>/dev/null; ls $OUT
