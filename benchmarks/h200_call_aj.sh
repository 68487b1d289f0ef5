#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: after call AI
# (CUPTI's records read directly; cupti-python's from_ptr objects in the cross-check complained on release):
# the cross-check reads with numpy instead, and on a GPU each implementation's warm-up and timed calls run as a
# block. The flush cost with both readers, the gpu-marked tests, and the h24 ps1 suite.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/aj
echo "== flush cost, direct"; timeout 60 python3 benchmarks/cupti_flush_cost.py --calls 320 2>&1 | head -n 8
echo "== flush cost, cupti-python"; timeout 60 python3 benchmarks/cupti_flush_cost.py --calls 160 --cupti-python-objects 2>&1 | head -n 5
echo "== gpu tests"; timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 4
echo "== suite"; timeout 120 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/aj 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
grep -h "reward_hack\|error\|Error" /tmp/w/aj/*.stderr.txt | head -5
tar czf $OUT/aj.tgz -C /tmp/w aj 2>/dev/null; ls $OUT
