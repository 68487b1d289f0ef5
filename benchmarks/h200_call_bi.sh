#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: one `kictl bench` process per
# attention definition (FlashInfer wrapper, every workload, sandboxed, CUPTI) on the code that records busyMedianNs
# (the time a call's activities cover, its span less the gaps), then the `gpu`-marked tests.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/bi; mkdir -p $W
timeout 120 python3 benchmarks/h200_timer_check.py --out $W --passes cupti 2>&1 | grep -E "exit|no result"
cp $W/passes.json $OUT/bi_passes.json
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed" | tail -6
