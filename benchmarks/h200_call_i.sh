#!/usr/bin/env bash
# Device call I (issue 11), on the session's last device minutes: the GPU cheats, sandboxed, CUPTI timer.
#  1. attention (gqa_paged_decode_h32_kv8_d128_ps1), a small and a large workload: FlashInfer's wrapper and the
#     side-stream cheats (work on a side stream; work that outlives the call; a copy queued behind it) and the
#     identity-keyed cache;
#  2. rmsnorm_h4096 on CUDA: the cache, setup and timer cheats next to the reference and torch.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/i; mkdir -p $W
D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations C=tests/assets/cheats
s=$(date +%s); timeout 80 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --impl $C/attention_cached_by_identity.py \
  --impl $C/attention_side_stream.py --impl $C/attention_side_stream_outlives.py --impl $C/attention_side_stream_copy.py \
  --workload b1_kv73 --workload b128x_kv1024 --device cuda --timeout 40 --out $W/attention >$W/attention.txt 2>&1
echo "== attention: exit $? in $(( $(date +%s) - s )) s"; grep -v '^wrote' $W/attention.txt | cut -c1-230 | tail -n 30
R=rmsnorm_h4096 args=""
for c in values_cached_by_identity values_cached_by_data_ptr values_cached_by_version values_precomputed_in_setup \
  rmsnorm_cached_output timer_forged_samples rmsnorm_patches_timer timer_clock_swapped_in_setup; do args="$args --impl $C/$c.py"; done
s=$(date +%s); timeout 80 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm $args --workload b64 --device cuda --timeout 30 \
  --out $W/rmsnorm >$W/rmsnorm.txt 2>&1
echo "== rmsnorm: exit $? in $(( $(date +%s) - s )) s"; grep -v '^wrote' $W/rmsnorm.txt | cut -c1-230 | tail -n 24
tar czf $OUT/i.tgz -C /tmp/w i 2>/dev/null; ls -la $OUT
