#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache: the cheats' verdicts with
# their details, for RESULTS.md (call P ran the same sessions as gpu-marked tests, which print pass/fail only).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/t; mkdir -p $W
R=rmsnorm_h4096 D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations C=tests/assets/cheats
show() { python3 -c "
import json,sys
for r in json.load(open(sys.argv[1])):
    print(r['implementation'].rsplit('_',1)[0], r['workload'], r['status'], r['latencyNs'], '|', r['statusDetail'][:330])" "$1"; }
impls=""; for c in values_cached_by_identity values_cached_by_data_ptr values_cached_by_version values_cached_by_samples \
  values_precomputed_in_setup rmsnorm_cached_output timer_forged_samples rmsnorm_patches_timer timer_reads_harness_frames \
  timer_events_moved timer_cupti_switched_off timer_clock_swapped_in_setup; do impls="$impls --impl $C/$c.py"; done
echo "== rmsnorm, CUPTI"
timeout 200 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm $impls --workload b64 --device cuda --json \
  --out $W/rms >$W/rms.json 2>$W/rms.err; echo "exit $?"; show $W/rms.json
echo "== rmsnorm, --timer events"
timeout 60 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm --impl $C/timer_events_moved.py --workload b64 \
  --device cuda --timer events --json --out $W/ev >$W/ev.json 2>$W/ev.err; echo "exit $?"; show $W/ev.json
echo "== decode, FlashInfer and the cheats"
timeout 200 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --impl $C/attention_cached_by_identity.py \
  --impl $C/attention_side_stream.py --impl $C/attention_side_stream_outlives.py --impl $C/attention_side_stream_copy.py \
  --workload b1_kv73 --workload b16x_kv1024 --device cuda --timeout 60 --json --out $W/att >$W/att.json 2>$W/att.err
echo "exit $?"; show $W/att.json
tar czf $OUT/t.tgz -C /tmp/w t 2>/dev/null; ls -la $OUT
