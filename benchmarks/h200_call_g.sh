#!/usr/bin/env bash
# Device call G (issues 11, 10, 14, 16), FlashInfer's cached kernels installed as AOT kernels (h200_setup.sh):
# the sandboxed prefill session that stalled in call F; three separate `kictl bench` processes on every attention
# workload (the spread); the reruns of the bundled H200 runs; the GPU cheats; the plain run against --devices all.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/g; mkdir -p $W
python3 -m pip show cuda-bindings nvidia-cuda-cupti cuda-pathfinder 2>/dev/null | grep -E '^(Name|Version|Location)' | paste - - - >$W/image_pkgs.txt
P=gqa_paged_prefill_causal_h24_kv4_d128_ps1 I=implementations
s=$(date +%s); timeout 100 python3 -m kictl bench $P --impl $I/$P/flashinfer_wrapper --impl $I/$P/torch_sdpa --impl $I/$P/reference \
  --workload q154_kv154 --device cuda --timeout 60 --out $W/honest >$W/honest.txt 2>&1
echo "== honest prefill, sandboxed: exit $? in $(( $(date +%s) - s )) s"; tail -n 8 $W/honest.txt
echo "== spread"; timeout 240 python3 benchmarks/h200_timer_check.py --out $W --passes cupti,cupti,cupti 2>&1 | tail -n 24
echo "== reruns"; timeout 100 python3 benchmarks/h200_rerun.py --out $W --timeout 80 2>&1 | tail -n 12
echo "== cheats"; timeout 120 python3 benchmarks/walls_gpu_check.py --out $W --part cheats 2>&1 | tail -n 34
echo "== scale"; timeout 100 python3 benchmarks/scale_gpu_check.py --out $W --definition gqa_paged_decode_h32_kv8_d128_ps1 2>&1 | tail -n 8
tar czf $OUT/g.tgz -C /tmp/w g 2>/dev/null; ls -la $OUT
