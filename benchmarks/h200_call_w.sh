#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache, the last of the session's
# device time: the instance watch of timerNotPatched on a GPU, an honest run under it (no false alarm) and the
# cheat that replaces the timer instance's clock and elapsed time.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
R=rmsnorm_h4096 D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations
timeout 40 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm --impl tests/assets/cheats/timer_instance_patched.py \
  --workload b64 --device cuda --iterations 40 --trials 1 --out /tmp/w1 2>&1 | grep -v '^wrote\|^t=' | cut -c1-220 | tail -n 12
timeout 40 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --workload b1_kv73 --device cuda --iterations 40 \
  --trials 1 --out /tmp/w2 2>&1 | grep -v '^wrote\|^t=' | cut -c1-220 | tail -n 4
