#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: does where a small kernel's
# tensors lie move its figure (benchmarks/placement_effect.py: FlashInfer on three small h24 ps1 workloads, eight
# copies of the inputs at other addresses in one process, then the first again), twice with other spacers.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
timeout 150 python3 benchmarks/placement_effect.py --calls 150 --placements 8 2>&1 | tail -n 5
timeout 150 python3 benchmarks/placement_effect.py --calls 150 --placements 8 --seed 1 2>&1 | tail -n 3
