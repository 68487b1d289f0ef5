#!/usr/bin/env bash
# Issues 16 and 11 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite
# twice with a worker's large answers through memory shared with the parent (wire.SharedRegion)
# instead of the pipe, then the `gpu`-marked tests.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/az
timeout 200 python3 benchmarks/suite_speed.py --repeats 2 --out /tmp/w/az 2>&1 | grep '^| [12] |\|^| flashinfer\|^| reference'
grep -h '^request\|^timing' /tmp/w/az/run*.stderr.txt
timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -4
tar czf $OUT/az.tgz -C /tmp/w az 2>/dev/null; ls $OUT
