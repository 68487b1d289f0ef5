#!/usr/bin/env bash
# Issue 16 (and 11) on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite
# (FlashInfer wrapper + reference, 7 workloads, two `kictl bench` processes) on the session's final code (call Y's
# changes, the reference worker's inputs kept per plan, reference workers without CUPTI), then the gpu-marked
# tests of tests/bench.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/z; mkdir -p $W
echo "== suite"
timeout 240 python3 benchmarks/suite_speed.py --repeats 2 --out $W 2>&1 | tail -n 24
echo "== gpu tests"
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 22 | tee $W/pytest.txt
tar czf $OUT/z.tgz -C /tmp/w z 2>/dev/null; ls -la $OUT
