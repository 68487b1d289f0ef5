#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: after call AG's
# findings (the timer's settle state watched as if patched, the finish's own kernels counted outside the last
# window; the touch buffer taken out of the protocol): the gpu-marked tests of tests/bench, where CUPTI's share
# of a call goes (cupti_flush_cost.py), and the h24 ps1 suite (suite_speed.py).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/ah
echo "== gpu tests"; timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 24
echo "== flush cost"; timeout 90 python3 benchmarks/cupti_flush_cost.py --calls 320 2>&1 | tail -n 30
echo "== suite"; timeout 120 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/ah 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
grep -h "reward_hack\|error" /tmp/w/ah/*.stderr.txt | head -5
tar czf $OUT/ah.tgz -C /tmp/w ah 2>/dev/null; ls $OUT
