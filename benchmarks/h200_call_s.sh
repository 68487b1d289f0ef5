#!/usr/bin/env bash
# Issue 11 on the lent H200 (session 4 of 2026-12-01), carrying .whl .deb .fi_cache: where the spread of the
# smallest workloads between processes comes from. Three `kictl bench` processes each of decode b1_kv73 and
# h24 q1_kv1 (FlashInfer wrapper, CUPTI) with the default 4 input sets, and three with 16.
set -u
. benchmarks/h200_setup.sh || exit 1
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
W=/tmp/w/s; mkdir -p $W
for sets in 4 16; do for d in gqa_paged_decode_h32_kv8_d128_ps1:b1_kv73 gqa_paged_prefill_causal_h24_kv4_d128_ps1:q1_kv1; do
  def=${d%%:*} wl=${d##*:}
  for i in 1 2 3; do
    timeout 60 python3 -m kictl bench $def --impl implementations/$def/flashinfer_wrapper --workload $wl --device cuda \
      --input-sets $sets --json --out $W/out >$W/$wl-$sets-$i.json 2>$W/$wl-$sets-$i.err
    python3 -c "import json,sys; r=json.load(open(sys.argv[1]))[0]; print(sys.argv[2], sys.argv[3], r['status'], r['latencyNs'])" \
      $W/$wl-$sets-$i.json $wl "sets=$sets"
  done
done; done
rm -rf $W/out; tar czf $OUT/s.tgz -C /tmp/w s 2>/dev/null; ls -la $OUT
