#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite (FlashInfer
# wrapper + reference, one `kictl bench` process) after the workers draw large inputs in threads (the prepare phase).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
timeout 150 python3 benchmarks/suite_speed.py --repeats 1 --out /tmp/w/af 2>&1 | grep '^| 1 |\|^| flashinfer'
