#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite (FlashInfer
# wrapper + reference, 7 workloads, two `kictl bench` processes) on the session's final code: the GPU's default
# count capped at 1 s (at least 20 calls), 4 reference workers without CUPTI, the comparator's fast path in chunks
# of 64 K elements per torch thread; then the comparator at torch's default thread count.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/aa; mkdir -p $W
echo "== suite"
timeout 240 python3 benchmarks/suite_speed.py --repeats 2 --out $W 2>&1 | tail -n 24
echo "== comparator"
python3 benchmarks/compare_speed.py --repeats 3 --threads "$(nproc)" 2>&1 | tail -n 8
tar czf $OUT/aa.tgz -C /tmp/w aa 2>/dev/null; ls -la $OUT
