#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 5 of 2026-12-01), carrying .whl .deb .fi_cache: after call AB found that
# device-wide memory traffic moves a small kernel's figure as the reference's calls do (clocks, idle and a longer
# spin do not), whether touching one byte in every 64 KiB of 8 GiB (address translation alone) does the same, and
# whether it makes "alone" and "after the reference" read alike.
set -u
. benchmarks/h200_setup.sh >/dev/null || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME
timeout 400 python3 benchmarks/neighbour_effect.py --calls 200 --touch 2>&1 | tail -n 20
