#!/usr/bin/env bash
# Device call C (issues 10 and 11): `kictl bench` on the GPU, sandboxed, CUPTI timer: honest implementations,
# three separate processes on every attention workload (the timer check), the GPU cheats. Time-boxed steps.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
P=gqa_paged_prefill_causal_h24_kv4_d128_ps1 D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations C=tests/assets/cheats
timeout 110 python3 -m kictl bench $P --impl $I/$P/flashinfer_wrapper --impl $I/$P/torch_sdpa --impl $I/$P/reference \
  --workload q154_kv154 --device cuda --timeout 90 --out "$OUT/honest" >"$OUT/honest.txt" 2>&1
tail -n 14 "$OUT/honest.txt"
timeout 100 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --impl $C/attention_cached_by_identity.py \
  --impl $C/attention_side_stream.py --workload b16x_kv1024 --workload b1_kv73 --device cuda --timeout 60 \
  --out "$OUT/cheats" >"$OUT/cheats.txt" 2>&1
tail -n 16 "$OUT/cheats.txt"
timeout 270 python3 benchmarks/h200_timer_check.py --out "$OUT" --passes cupti,cupti,cupti,events 2>&1 | tail -n 24
ls -la "$OUT"
for d in honest cheats; do cp "$OUT/$d"/*.json "$OUT/$d.records.json" 2>/dev/null; rm -rf "$OUT/$d"; done; ls -la "$OUT"
