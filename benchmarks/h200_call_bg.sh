#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: the `gpu`-marked tests after the
# events and graph timers moved their launch padding before the device spin (in call BF, padding after the spin
# cost two tests the call's enqueue ahead of the device).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | grep -E "^(PASSED|FAILED|ERROR)|passed|failed" | tail -24
