#!/usr/bin/env bash
# Issue 16's Ray leg on the lent H200 (session 7 of 2026-12-01), carrying only .whl_ray (benchmarks/
# slim_ray_wheel.py's Ray wheel): right after call AV on the same warm machine, against AV's plain run.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_ray/*.whl || exit 1
[ -d /tmp/site/flashinfer ] || { echo "the machine is not the warm one of call AV: /tmp/site has no FlashInfer"; exit 1; }
[ -d /tmp/w/av ] || { echo "no /tmp/w/av: call AV's plain run is not here"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib KICTL_BWRAP=/tmp/bw/usr/bin/bwrap
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/aw; mkdir -p $W
timeout 400 python3 benchmarks/scale_gpu_check.py --out $W --legs ray --expected /tmp/w/av \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 8
tar czf $OUT/aw.tgz -C /tmp/w aw 2>/dev/null; ls $OUT
