#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: what moves a small kernel's
# CUPTI figure between a neighbour's calls (benchmarks/neighbour_effect.py: FlashInfer on three small h24 ps1
# workloads, alone / after the reference / after the reference with a 1 ms spin / after idle / after traffic).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
timeout 400 python3 benchmarks/neighbour_effect.py --calls 200 2>&1 | tail -n 24
