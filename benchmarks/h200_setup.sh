#!/usr/bin/env bash
# Source this on the lent H200 (from the repository root) before any GPU script here:
#   . benchmarks/h200_setup.sh
# It installs the wheels carried in .whl/ (kictl's dependencies, flashinfer, cupti-python and its libcupti, as
# benchmarks/carry.sh builds them here) into /tmp/site, unpacks the carried bubblewrap .deb into
# /tmp/bw, and restores a carried FlashInfer JIT cache (.fi_cache/*.txz or *.tgz) so kernels are not rebuilt.
# a warm machine keeps /tmp between calls: install once per set of wheels
if [ "$(cat /tmp/site/.wheels 2>/dev/null)" != "$(ls .whl)" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
  # sandboxed workers never write bytecode (read-only folders): compile it once, or every worker compiles
  # FlashInfer's and the other carried packages' sources at every start
  python3 -m compileall -q -j 0 /tmp/site >/dev/null 2>&1
  ls .whl >/tmp/site/.wheels
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls .deb/bubblewrap_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/bw && dpkg -x .deb/bubblewrap_*.deb /tmp/bw && export KICTL_BWRAP=/tmp/bw/usr/bin/bwrap PATH=/tmp/bw/usr/bin:$PATH
fi
caches=$(ls .fi_cache/*.txz .fi_cache/*.tgz 2>/dev/null)  # either kind may be absent: ls then fails, and says nothing
if [ -n "$caches" ]; then
  for f in $caches; do tar xf "$f" -C "$HOME"; done
  # the wheels were just installed, so their sources are newer than the cached builds: make the builds
  # newer again, or ninja rebuilds every kernel (in every sandboxed worker's private copy of the cache)
  find "$HOME/.cache/flashinfer" -type f -exec touch {} +
  # FlashInfer runs ninja on every JIT module load, and inside kictl's sandbox ninja rebuilt the prefill module
  # (85 s, in every worker's private copy: device call F). Installed AOT kernels, which FlashInfer loads without
  # ninja (what the flashinfer-jit-cache package provides), avoid that: install the cached builds as such.
  for so in "$HOME"/.cache/flashinfer/*/*/cached_ops/*/*.so; do
    [ -f "$so" ] || continue
    name=$(basename "$(dirname "$so")"); mkdir -p "/tmp/site/flashinfer/data/aot/$name" && cp "$so" "/tmp/site/flashinfer/data/aot/$name/"
  done
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
