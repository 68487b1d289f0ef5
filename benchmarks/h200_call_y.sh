#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite
# (FlashInfer wrapper + reference, 7 workloads, one `kictl bench` process each, two processes) after call X with
# the GPU's default count capped at 1 s (at least 20 calls), the reference's outputs shared out among 4 reference
# workers and the audits compared in threads; then the comparator's speed on the device's CPU.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/y; mkdir -p $W
echo "== suite"
timeout 300 python3 benchmarks/suite_speed.py --repeats 2 --out $W 2>&1 | tail -n 24
echo "== comparator"
python3 benchmarks/compare_speed.py --repeats 3 2>&1 | tail -n 9
tar czf $OUT/y.tgz -C /tmp/w y 2>/dev/null; ls -la $OUT
