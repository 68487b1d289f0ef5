#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 8 of 2026-12-01), carrying .whl .deb .fi_cache: does the GPU's temperature move a
# small kernel's figure (benchmarks/thermal_effect.py: FlashInfer's small decode and prefill calls timed in rounds,
# the GPU idle, then heated by bf16 GEMMs between rounds, then cooling; NVML's temperatures after each round).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
timeout 300 python3 benchmarks/thermal_effect.py --calls 150 --heat-s 8 --rounds 4 2>&1 | grep -v Warning | tail -n 15
