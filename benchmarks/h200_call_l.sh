#!/usr/bin/env bash
# Next session's second device call (issues 11 and 16), carrying .whl .deb .fi_cache, right after call J:
#  the spread (two more processes of the ps64 and decode definitions; call G of 2026-12-01 made one each) and the
#  plain run against --devices all on the h24 suite (benchmarks/scale_gpu_check.py; its Ray leg is call K's).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/l; mkdir -p $W
D=gqa_paged_decode_h32_kv8_d128_ps1
echo "== spread"; timeout 330 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti \
  --definition gqa_paged_prefill_causal_h20_kv4_d128_ps64 --definition $D 2>&1 | tail -n 3
echo "== devices all"; timeout 220 python3 benchmarks/scale_gpu_check.py --out $W --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 8
tar czf $OUT/l.tgz -C /tmp/w l 2>/dev/null; ls -la $OUT
