#!/usr/bin/env bash
# Benchmarks on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: neighbour_effect.py and
# placement_effect.py after they came to share their setup (neighbour_effect.h24_session), on few calls: that
# they still run.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
timeout 90 python3 benchmarks/neighbour_effect.py --calls 20 --workload q1_kv1 2>&1 | tail -n 7
timeout 90 python3 benchmarks/placement_effect.py --calls 30 --placements 3 --workload q1_kv1 2>&1 | tail -n 3
