#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: the stop's final code (the
# padding's count from the os.urandom bound before the import, Tensor.zero_ watched, the timer's state attributes
# type-checked): one `kictl bench` process per attention definition, then the `gpu`-marked tests.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/bj; mkdir -p $W
timeout 120 python3 benchmarks/h200_timer_check.py --out $W --passes cupti 2>&1 | grep -E "exit|no result"
cp $W/passes.json $OUT/bj_passes.json
timeout 200 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed" | tail -6
