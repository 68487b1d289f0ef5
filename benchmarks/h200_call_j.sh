#!/usr/bin/env bash
# Next session's first device call (issues 11 and 16), carrying .whl .deb .fi_cache (about 60 MB): what the
# session of 2026-12-01 could not run. Each step is time-boxed and writes its records before the next starts.
#  1. suite speed: the h24 ps1 suite (FlashInfer wrapper + reference, 7 workloads), 3 processes, with phases;
#  2. the GPU cheats (attention side streams, caches; rmsnorm caches, setup and timer cheats), 240 s each;
# Then call L (the spread, --devices all) and, WITHIN 30 s of L's return while the machine is warm, call K (Ray,
# carried on its own). A device call runs 10 minutes at most: the boxes here add up to 9.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/j; mkdir -p $W
echo "== suite"; timeout 170 python3 benchmarks/suite_speed.py --repeats 3 --out $W 2>&1 | tail -n 16
D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations C=tests/assets/cheats
timeout 170 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --impl $C/attention_cached_by_identity.py \
  --impl $C/attention_side_stream.py --impl $C/attention_side_stream_outlives.py --impl $C/attention_side_stream_copy.py \
  --workload b1_kv73 --workload b128x_kv1024 --device cuda --timeout 60 --timings --out $W/attention >$W/attention.txt 2>&1
echo "== attention cheats: exit $?"; grep -v '^wrote' $W/attention.txt | cut -c1-230 | tail -n 24
R=rmsnorm_h4096 args=""
for c in values_cached_by_identity values_cached_by_data_ptr values_cached_by_version values_cached_by_samples \
  values_precomputed_in_setup rmsnorm_cached_output timer_forged_samples rmsnorm_patches_timer timer_clock_swapped_in_setup; do
  args="$args --impl $C/$c.py"; done
timeout 150 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm $args --workload b64 --device cuda --timeout 60 --timings \
  --out $W/rmsnorm >$W/rmsnorm.txt 2>&1
echo "== rmsnorm cheats: exit $?"; grep -v '^wrote' $W/rmsnorm.txt | cut -c1-230 | tail -n 16
tar czf $OUT/j.tgz -C /tmp/w j 2>/dev/null; ls -la $OUT
