#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: the gpu-marked tests of
# tests/bench on the session's final code (kictl's reader of CUPTI's buffers watched like the collector), and
# FlashInfer with the bundled cheats on decode once more, so that the watch is seen to leave honest runs alone.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 21
