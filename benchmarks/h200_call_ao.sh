#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: the final code (kictl's
# buffer walk also asks libcupti for dropped records): the flush cost with kictl's reader, then the gpu-marked
# tests of tests/bench.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 60 python3 benchmarks/cupti_flush_cost.py --calls 160 2>&1 | head -n 8
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -q tests/bench 2>&1 | tail -n 3
