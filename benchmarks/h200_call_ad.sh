#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite (FlashInfer
# wrapper + reference) with 1, 2 and 8 reference workers (KICTL_REFERENCE_WORKERS), beside call AA's default of 4:
# what the pool's size does to the start, preparation and reference phases.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
for n in 1 2 8; do
  echo "== $n reference worker(s)"
  KICTL_REFERENCE_WORKERS=$n timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --no-precompile --out /tmp/w/ad$n 2>&1 \
    | grep '^| 1 |'
done
