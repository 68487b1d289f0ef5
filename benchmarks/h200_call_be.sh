#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: can the harness make a small
# call's figure independent of its process (benchmarks/launch_phase_remedy.py: kictl's timer as is, with 0-7 random
# one-element fills before each call's flush, and with those and a read flush; six rebuilds each), in three processes.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
for n in 1 2 3; do
  timeout 180 python3 benchmarks/launch_phase_remedy.py --calls 200 --rebuilds 6 2>&1 | grep -v Warning | tail -n 15
done
