#!/usr/bin/env bash
# Source this on the lent H200 (from the repository root) before any GPU script here:
#   . benchmarks/h200_setup.sh
# It puts the wheels carried in .whl/ (kictl's dependencies, flashinfer, cupti-python and its libcupti, packed
# by benchmarks/carry.sh here as one xz tarball of their files) into /tmp/site, unpacks the carried bubblewrap
# .deb into /tmp/bw, and restores a carried FlashInfer JIT cache (.fi_cache/*.txz or *.tgz, benchmarks/fi_cache.sh)
# so kernels are not rebuilt.
# a warm machine keeps /tmp between calls: carry_parts.sh join unpacks once per set of wheels, and compiles their
# bytecode once (sandboxed workers never write it: read-only folders), or every worker would compile FlashInfer's
# and the other carried packages' sources at every start
if [ ! -f .whl/part.0 ]; then
  echo "h200_setup.sh: no packed wheels in .whl/ (run bash benchmarks/carry.sh here and carry .whl)" >&2
  return 1
fi
bash benchmarks/carry_parts.sh join /tmp/site .whl || return 1
# wheels carried in three parts (benchmarks/carry_parts.sh: nvidia-cutlass-dsl), joined where all came
bash benchmarks/carry_parts.sh join /tmp/site .carry_a .carry_b .carry_c ||
  echo "h200_setup.sh: the wheels carried in parts were not joined (above); going on without them" >&2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
# nvidia-cutlass-dsl puts `cutlass` on sys.path from a .pth file, which a PYTHONPATH folder does not run
if [ -d /tmp/site/nvidia_cutlass_dsl/dsl_packages ]; then
  export PYTHONPATH=$PYTHONPATH:/tmp/site/nvidia_cutlass_dsl/dsl_packages
fi
export LD_LIBRARY_PATH=/tmp/site/nvidia/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if ls .deb/bubblewrap_*.deb >/dev/null 2>&1; then
  mkdir -p /tmp/bw && dpkg -x .deb/bubblewrap_*.deb /tmp/bw && export KICTL_BWRAP=/tmp/bw/usr/bin/bwrap PATH=/tmp/bw/usr/bin:$PATH
fi
bash benchmarks/fi_cache.sh restore .fi_cache /tmp/site || return 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
