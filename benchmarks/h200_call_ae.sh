#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the gpu-marked tests of
# tests/bench on the session's final code (after call Z: the comparator's chunks per torch thread, the audits
# compared one after another again, KICTL_REFERENCE_WORKERS).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -n 22
