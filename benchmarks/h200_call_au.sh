#!/usr/bin/env bash
# Issues 16 and 11 on the lent H200 (session 7 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite
# twice on this session's code (a workload's runs judged while the next one is prepared, never during timed calls), where a worker's
# start goes (benchmarks/worker_start.py), then the `gpu`-marked tests.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/au
timeout 200 python3 benchmarks/suite_speed.py --repeats 2 --out /tmp/w/au 2>&1 | grep '^| [12] |\|^| flashinfer\|^| reference'
grep -h '^request\|^timing' /tmp/w/au/run*.stderr.txt
timeout 120 python3 benchmarks/worker_start.py --processes 1 6 --repeats 2
timeout 240 python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench 2>&1 | tail -25
tar czf $OUT/au.tgz -C /tmp/w au 2>/dev/null; ls $OUT
