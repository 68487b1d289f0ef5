#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: does kictl's harness set the gap
# between a small FlashInfer prefill call's two kernels (benchmarks/gap_effect.py: calibrated or 1 ms spin, L2 flush
# by a write, by a read, or none, taking turns call by call), in two processes.
# (--no-padding came with the refactor after the call: the call ran before kictl padded its calls, which is what it asks for.)
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
for n in 1 2; do
  timeout 200 python3 benchmarks/gap_effect.py --calls 300 --no-padding 2>&1 | grep -v Warning | tail -n 17
done
