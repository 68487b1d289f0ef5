#!/usr/bin/env bash
# Issues 11 and 16 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: after call AH
# (the audit's copies after a run's last call counted as that call's; cupti-python's per-record objects found to
# be most of the harness's cost per call): CUPTI's records read directly (kictl.bench.cupti_timer.DirectRecords).
# The gpu-marked tests, the flush cost with both readers, and the h24 ps1 suite.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/ai
echo "== flush cost, direct"; timeout 60 python3 benchmarks/cupti_flush_cost.py --calls 320 2>&1 | head -n 9
echo "== flush cost, cupti-python"; timeout 60 python3 benchmarks/cupti_flush_cost.py --calls 160 --cupti-python-objects 2>&1 | head -n 5
echo "== gpu tests"; timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 22
echo "== suite"; timeout 120 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/ai 2>&1 | grep '^| 1 |\|^| flashinfer\|^| reference'
grep -h "reward_hack\|error" /tmp/w/ai/*.stderr.txt | head -5
tar czf $OUT/ai.tgz -C /tmp/w ai 2>/dev/null; ls $OUT
