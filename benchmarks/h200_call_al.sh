#!/usr/bin/env bash
# Issue 16 on the lent H200 (session 6 of 2026-12-01), carrying .whl .deb .fi_cache: the h24 ps1 suite twice more
# on the session's final code (CUPTI calls settled in batches and read directly; a block per implementation).
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
mkdir -p /tmp/w/al
timeout 200 python3 benchmarks/suite_speed.py --repeats 2 --out /tmp/w/al 2>&1 | grep '^| [12] |\|^| flashinfer\|^| reference'
tar czf $OUT/al.tgz -C /tmp/w al 2>/dev/null; ls $OUT
