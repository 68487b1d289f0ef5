#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache:
#  1. the gpu-marked tests themselves (pytest -m gpu): every cheat of tests/assets/cheats that exists on a GPU,
#     under CUPTI and under --timer events (the events moved from inside run(), CUPTI switched off);
#  2. the honest attention implementations under the new timer-tampering rules (no false alarm):
#     FlashInfer and torch SDPA on h24 ps1, FlashInfer on decode;
#  3. what ncu adds to a trivial kernel's gpu__time_duration (benchmarks/ncu_fixed_cost.py).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/p; mkdir -p $W
echo "== pytest -m gpu"
timeout 300 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench/test_gpu_cheats.py \
  tests/bench/test_timing.py tests/bench/test_cheats.py >$W/pytest_gpu.txt 2>&1
echo "exit $?"; grep -v '^PASSED\|^$' $W/pytest_gpu.txt | cut -c1-400 | tail -n 25
I=implementations H=gqa_paged_prefill_causal_h24_kv4_d128_ps1 D=gqa_paged_decode_h32_kv8_d128_ps1
timeout 90 python3 -m kictl bench $H --impl $I/$H/flashinfer_wrapper --impl $I/$H/torch_sdpa --workload q1_kv1 \
  --workload q154_kv154 --device cuda --timeout 60 --out $W/h24 >$W/h24.txt 2>&1
echo "== honest h24: exit $?"; grep -v '^wrote\|^t=' $W/h24.txt | cut -c1-220 | tail -n 6
timeout 60 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --workload b1_kv73 --workload b16x_kv1024 \
  --device cuda --timeout 60 --out $W/decode >$W/decode.txt 2>&1
echo "== honest decode: exit $?"; grep -v '^wrote\|^t=' $W/decode.txt | cut -c1-220 | tail -n 4
echo "== ncu fixed cost"
timeout 40 python3 benchmarks/ncu_fixed_cost.py --cupti --out $W --calls 20
timeout 100 /usr/local/cuda/bin/ncu --cache-control none --clock-control none --metrics gpu__time_duration.sum --csv \
  python3 benchmarks/ncu_fixed_cost.py --calls 20 >$W/ncu_fixed.csv 2>$W/ncu_fixed.err
echo "ncu exit $?"; python3 benchmarks/ncu_fixed_cost.py --compare $W --calls 20
tar czf $OUT/p.tgz -C /tmp/w p 2>/dev/null; ls -la $OUT
