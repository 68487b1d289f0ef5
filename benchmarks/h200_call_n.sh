#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 3 of 2026-12-01), carrying .whl .deb .fi_cache:
#  1. the harness's cost per timed call (benchmarks/gpu_call_cost.py), after the CUPTI buffer change;
#  2. stream ordering by CUPTI's dependency records on the real driver (benchmarks/stream_order_check.py);
#  3. the attention cheats and the honest implementations under the new streamOrdered rule (decode, a small and
#     a mid-size workload) and torch SDPA on two h24 workloads;
#  4. plain against --devices all in ONE call (the same kictl commit, so the same protocol) on two h24 workloads.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/n; mkdir -p $W
echo "== call cost"; timeout 40 python3 benchmarks/gpu_call_cost.py --calls 200 2>&1 | tee $W/call_cost.md | tail -n 13
timeout 40 python3 benchmarks/gpu_call_cost.py --calls 200 --buffer-bytes 262144 2>&1 | tee $W/call_cost_256k.md | tail -n 13
echo "== stream order"; timeout 45 python3 benchmarks/stream_order_check.py --out $W 2>&1 | tail -n 16
D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations C=tests/assets/cheats
timeout 150 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --impl $I/$D/reference \
  --impl $C/attention_cached_by_identity.py --impl $C/attention_side_stream.py \
  --impl $C/attention_side_stream_outlives.py --impl $C/attention_side_stream_copy.py \
  --workload b1_kv73 --workload b16x_kv1024 --device cuda --timeout 60 --timings --out $W/attention >$W/attention.txt 2>&1
echo "== attention cheats: exit $?"; grep -v '^wrote\|^t=' $W/attention.txt | cut -c1-260 | tail -n 12
H=gqa_paged_prefill_causal_h24_kv4_d128_ps1
timeout 50 python3 -m kictl bench $H --impl $I/$H/torch_sdpa --workload q1_kv1 --workload q154_kv154 --device cuda \
  --timeout 60 --out $W/sdpa >$W/sdpa.txt 2>&1
echo "== torch sdpa: exit $?"; grep -v '^wrote\|^t=' $W/sdpa.txt | cut -c1-200 | tail -n 4
echo "== plain and devices all"; timeout 100 python3 benchmarks/scale_gpu_check.py --out $W/scale --legs plain,devices \
  --definition $H --workload q1_kv1 --workload q154_kv154 2>&1 | tail -n 4
tar czf $OUT/n.tgz -C /tmp/w n 2>/dev/null; ls -la $OUT
