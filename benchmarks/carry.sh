#!/usr/bin/env bash
# Builds, on this machine, what a device call carries (the lent GPU machine has no network):
#
#   bash benchmarks/carry.sh      then: run(..., carry=[".whl", ".deb", ".fi_cache", ".source"])
#
# .whl/  the wheels benchmarks/h200_setup.sh installs there, for its Python 3.12 on x86_64: kictl's dependencies,
#        flashinfer-python and apache-tvm-ffi, cupti-python and libcupti (nvidia-cuda-cupti, slimmed to libcupti
#        itself: the profiler libraries it loads only for the range profiler are 40 MB of a 64 MiB carry), and
#        flashinfer-bench with safetensors and docstring-parser (suite_speed.py --flashinfer-bench runs its harness);
#        downloaded into .wheels/ (not carried) and packed into .whl/ as one xz tarball of their files
#        (benchmarks/carry_parts.sh split, one part): 20 MB, where the wheels are 37 MB. The device tool's
#        64 MiB is of the size of a tar of what travels, as far as stop 60 could tell (refused at 64.06 MiB as a
#        tar, taken at 63.41): 512 bytes a file besides its content, so the registry's 5,336 small files make the
#        tracked files 28.5 MiB, not 20;
# .deb/  bubblewrap, unpacked there for kictl's sandbox;
# .fi_cache/  left as it is: FlashInfer's JIT cache comes back from a call (KICTL_SAVE_FI_CACHE=1) and goes in here;
# .source/  kictl.tree, HEAD and the blobs of kictl/ at HEAD: the device's .git is stale, so device.sh points
#        KICTL_SOURCE_MANIFEST at it and the records name the commit that ran. Run this again before every call
#        (a second run takes about a second), and carry .source too.
#
# The versions are the ones every figure in RESULTS.md since 2026-11-30 was measured with; the image's own torch,
# triton, numpy and nvidia-ml-py are used as they are. Idempotent: a wheel already here is not fetched again.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .wheels .whl .deb .fi_cache .source
# the wheels themselves were carried in .whl/ before stop 60: kept, not fetched again
find .whl -mindepth 1 -maxdepth 1 -type f -name "*.whl" -exec mv -t .wheels {} +
{ git rev-parse HEAD && git ls-tree -r HEAD -- kictl; } >.source/kictl.tree.tmp && mv .source/kictl.tree.tmp .source/kictl.tree
platforms=(--platform manylinux_2_28_x86_64 --platform manylinux_2_25_x86_64 --platform manylinux_2_17_x86_64
  --platform manylinux2014_x86_64 --platform any)
pins=(
  flashinfer-python==0.6.18.post1 apache-tvm-ffi==0.1.15.post2 cupti-python==13.0.1 nvidia-cuda-cupti==13.0.85
  typer==0.29.2 click==8.5.1 rich==15.0.0 shellingham==1.5.4 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0
  pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0
  rfc8785==0.1.4 cryptography==51.0.1 cffi==2.1.1 pycparser==3.12 gitpython==3.2.1 gitdb==4.0.12 smmap==5.0.3
  einops==0.8.2 tabulate==0.10.0 tqdm==4.70.1
  flashinfer-bench==0.1.2 safetensors==0.8.0 docstring-parser==0.18.0
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
  "${platforms[@]}" -d .wheels "${pins[@]}"
cupti=$(ls .wheels/nvidia_cuda_cupti-13.0.85-*.whl)
if unzip -l "$cupti" | grep -q libnvperf_host; then
  work=$(mktemp -d)
  unzip -q "$cupti" -d "$work"
  rm -rf "$work"/nvidia/cu13/include "$work"/nvidia/cu13/lib/{libnvperf_host,libnvperf_target,libcheckpoint,libpcsamplingutil}.so
  record=$(ls -d "$work"/*.dist-info)/RECORD
  grep -v 'cu13/include\|libnvperf\|libcheckpoint\|libpcsampling' "$record" >"$work/RECORD" && mv "$work/RECORD" "$record"
  rm "$cupti" && (cd "$work" && zip -qr "$OLDPWD/$cupti" .) && rm -rf "$work"
fi
# packed again only where the set of wheels changed (30 s on two cores)
listing=$(cd .wheels && ls -l --time-style=+ ./*.whl | awk '{print $5, $NF}')
if [ "$(cat .whl/wheels.txt 2>/dev/null)" != "$listing" ]; then
  rm -rf .whl && mkdir .whl
  bash benchmarks/carry_parts.sh split .wheels 1000000000000 .whl >/dev/null
  echo "$listing" >.whl/wheels.txt
fi
ls .deb/bubblewrap_*.deb >/dev/null 2>&1 || (cd .deb && apt-get download bubblewrap >/dev/null 2>&1)
# KICTL_CARRY_CUTLASS=1: nvidia-cutlass-dsl for FlashInfer's GDN kernels (CuTe DSL), 69 MB packed, in three parts
# for three calls (benchmarks/carry_parts.sh). What travels in a call is a tar of the checkout's tracked files
# (28.5 MiB at stop 60, growing with the registry) and the carried paths, 64 MiB in all: so after a usual call,
# carry [".carry_a"] alone (command `true`), then [".carry_b"] (`true`), then [".carry_c", ".source"] with the
# command that needs cutlass, each within 30 s of the last (the warm machine keeps the earlier calls' ignored
# paths). cuda-bindings, which it also needs, is the image's.
if [ "${KICTL_CARRY_CUTLASS:-0}" = 1 ]; then
  mkdir -p .carry_wheels
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp --abi cp312 \
    "${platforms[@]}" -d .carry_wheels nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1 \
    nvidia-cutlass-dsl-libs-core==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 protobuf==7.36.2
  # three parts of 25 MB for the 69 MB: each call then leaves 9 MiB of the 64 for the registry to grow (its tracked
  # files were 31.2 MiB as a tar at stop 60, 1.3 MiB more for each 100 runs)
  bash benchmarks/carry_parts.sh split .carry_wheels 25000000 .carry_a .carry_b .carry_c
fi
du -sh .whl .deb .fi_cache .carry_a .carry_b .carry_c 2>/dev/null || true
echo "carry.sh: .source/kictl.tree names $(git rev-parse --short HEAD)$(git status --porcelain -- kictl | grep -q . && echo ', but kictl/ has changes: records will say +dirty')"
