#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: which allocation flips a small
# FlashInfer call between its two figures (benchmarks/address_effect.py: per call, each kernel's CUPTI duration, the
# gap between kernels, the outputs' addresses; outputs moved, inputs moved, re-planned), in two processes.
# (--no-padding came with the refactor after the call: the call ran before kictl padded its calls, which is what it asks for.)
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
mkdir -p $OUT/bb
for n in 1 2; do
  timeout 200 python3 benchmarks/address_effect.py --out $OUT/bb --no-padding --calls 400 2>&1 | grep -v Warning | tail -n 16
done
