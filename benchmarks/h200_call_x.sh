#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache:
# (1) the instance watch of timerNotPatched on a GPU: an honest run under it and the cheat that replaces the
#     timer instance's clock (what call W of session 4 was to run), and its gpu-marked test;
# (2) the h24 ps1 suite (FlashInfer wrapper + reference) with the finite fast path of the comparator, keeping
#     every step's time (run1.stderr.txt) and the records, to see where the suite's time goes;
# (3) the comparator's speed on the device's CPU.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
R=rmsnorm_h4096 D=gqa_paged_decode_h32_kv8_d128_ps1 I=implementations W=/tmp/w/x; mkdir -p $W
echo "== instance watch"
timeout 40 python3 -m kictl bench $R --impl $I/$R/torch_rmsnorm --impl tests/assets/cheats/timer_instance_patched.py \
  --workload b64 --device cuda --iterations 40 --trials 1 --out /tmp/w1 2>&1 | grep -v '^wrote\|^t=' | cut -c1-240 | tail -n 12
timeout 40 python3 -m kictl bench $D --impl $I/$D/flashinfer_wrapper --workload b1_kv73 --device cuda --iterations 40 \
  --trials 1 --out /tmp/w2 2>&1 | grep -v '^wrote\|^t=' | cut -c1-240 | tail -n 4
echo "== gpu test"
timeout 90 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench/test_gpu_cheats.py -k instance_patched 2>&1 | tail -n 4
echo "== suite"
timeout 240 python3 benchmarks/suite_speed.py --repeats 1 --out $W 2>&1 | tail -n 22
echo "== comparator"
python3 benchmarks/compare_speed.py --repeats 3 2>&1 | tail -n 8
tar czf $OUT/x.tgz -C /tmp/w x 2>/dev/null; ls -la $OUT
