#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: the timers now pad each call
# with 0-7 one-element fills drawn at random (timing.LAUNCH_PHASES). Three separate `kictl bench` processes per
# attention definition (FlashInfer wrapper, every workload, sandboxed, CUPTI), the `gpu`-marked tests, then
# benchmarks/launch_alignment.py on top of the timer's own padding (each fixed k should now read the same share).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/bf; mkdir -p $W
for d in gqa_paged_prefill_causal_h24_kv4_d128_ps1 gqa_paged_prefill_causal_h20_kv4_d128_ps64 gqa_paged_decode_h32_kv8_d128_ps1; do
  timeout 150 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti,cupti --definition $d 2>&1 | grep -E "exit|no result"
  tar czf $OUT/bf.tgz -C /tmp/w bf 2>/dev/null
done
timeout 150 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -4
timeout 90 python3 benchmarks/launch_alignment.py --calls 40 --random-calls 200 2>&1 | grep -v Warning | tail -n 18
ls $OUT
