#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: what of a process moves a small
# kernel's figure (benchmarks/rebuild_effect.py: inputs, FlashInfer workspace and the timer's flush buffer rebuilt at
# other addresses in one process), in three separate processes, then the table.
# (--no-padding came with the refactor after the call: the call ran before kictl padded its calls, which is what it asks for.)
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
mkdir -p $OUT/ba
for n in 1 2 3; do
  timeout 170 python3 benchmarks/rebuild_effect.py --out $OUT/ba --no-padding --calls 120 --rebuilds 6 2>&1 | grep -v Warning | tail -n 7
done
python3 benchmarks/rebuild_effect.py --table $OUT/ba
