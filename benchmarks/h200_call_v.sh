#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache: the gpu-marked tests again
# on this stop's final code (the GPU's count capped by the time budget; the side-stream test folded into
# tests/bench/test_gpu_cheats.py).
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 190 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | grep -v '^$' | cut -c1-300 | tail -n 24
