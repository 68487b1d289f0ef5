#!/usr/bin/env bash
# Issue 16's Ray leg on the lent H200, carrying only .whl_ray (benchmarks/slim_ray_wheel.py's 40 MB Ray wheel and
# the jsonschema family): run right after call L while the machine is warm, so that /tmp/site still holds kictl's
# dependencies, FlashInfer and CUPTI, and /tmp/w/l the plain run's identity to compare with.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl_ray/*.whl || exit 1
[ -d /tmp/site/flashinfer ] || { echo "the machine is not the warm one of call L: /tmp/site has no FlashInfer"; exit 1; }
[ -d /tmp/w/l ] || { echo "no /tmp/w/l: call L's plain run is not here"; exit 1; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib KICTL_BWRAP=/tmp/bw/usr/bin/bwrap
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/k; mkdir -p $W
echo "== ray"; timeout 400 python3 benchmarks/scale_gpu_check.py --out $W --legs ray --expected /tmp/w/l \
  --definition gqa_paged_prefill_causal_h24_kv4_d128_ps1 2>&1 | tail -n 8
tar czf $OUT/k.tgz -C /tmp/w k 2>/dev/null; ls -la $OUT
