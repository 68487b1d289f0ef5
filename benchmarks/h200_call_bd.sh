#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: does the position of a call's
# launches in the command stream set the gap between its kernels (benchmarks/launch_alignment.py: k event records or
# k one-element fills enqueued before each call; then random padding against none), in three processes.
# (--no-padding came with the refactor after the call: the call ran before kictl padded its calls, which is what it asks for.)
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
for n in 1 2 3; do
  timeout 170 python3 benchmarks/launch_alignment.py --calls 40 --no-padding --random-calls 400 2>&1 | grep -v Warning | tail -n 18
done
