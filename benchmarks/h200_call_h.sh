#!/usr/bin/env bash
# Device call H (issues 14 and 11), the last of the session's device time: the reruns of the bundled H200 FlashInfer
# runs of gqa_paged_prefill_causal_h24_kv4_d128_ps1 (cffi now carried: kictl rerun imports cryptography), then two
# more separate `kictl bench` processes of that definition for the spread (call G made the first).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/h; mkdir -p $W
echo "== reruns"; timeout 90 python3 benchmarks/h200_rerun.py --out $W --timeout 80 2>&1 | tail -n 12
echo "== spread"; timeout 110 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 3
tar czf $OUT/h.tgz -C /tmp/w h 2>/dev/null; ls -la $OUT
