#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: the CUPTI timer
# settling its calls in batches of 16 and reading an 8 GiB touch buffer before each call (cold address
# translations). The gpu-marked tests of tests/bench; the harness's cost per call (gpu_call_cost.py); whether the
# timer's touch makes a small kernel's figure independent of its neighbour (neighbour_effect.py --timer-touch);
# the h24 ps1 suite's wall time (suite_speed.py).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/ag
echo "== gpu tests"; timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 24
echo "== call cost"; timeout 90 python3 benchmarks/gpu_call_cost.py --calls 300 2>&1 | tail -n 16
echo "== neighbours"; timeout 120 python3 benchmarks/neighbour_effect.py --calls 150 --timer-touch 2>&1 | tail -n 14
echo "== suite"; timeout 120 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/ag 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
tar czf $OUT/ag.tgz -C /tmp/w ag 2>/dev/null; ls $OUT
