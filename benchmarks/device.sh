#!/usr/bin/env bash
# One device call on the lent H200 for any GPU script here (the recipe that replaced the per-call h200_call_*.sh):
#
#   bash benchmarks/device.sh SCRIPT [ARGS...]     e.g. bash benchmarks/device.sh timer_repeatability.py --passes cupti
#   bash benchmarks/device.sh SCRIPT PART [ARGS...]  a script of parts, e.g. bash benchmarks/device.sh walls.py gpu
#   bash benchmarks/device.sh gpu-tests            the `gpu`-marked tests (python -m pytest -m gpu tests/bench)
#
# Run from the repository root with .whl/, .deb/, .fi_cache/ and .source/ carried (benchmarks/carry.sh makes them,
# benchmarks/h200_setup.sh says what they hold). SCRIPT is a file in benchmarks/; it gets `--out $OUT/<name>`
# (after PART, a first argument that is not an option) unless ARGS give `--out` or the script takes none
# (KICTL_DEVICE_NO_OUT=1); <name> is the script's name, with -PART. The whole log goes to $OUT/<name>.log, its tail to stdout.
# Environment: KICTL_DEVICE_TIMEOUT (seconds, default 540: a device call may last 600), KICTL_SAVE_FI_CACHE=1
# saves the FlashInfer JIT cache's built modules to $OUT/fi_cache.txz (benchmarks/fi_cache.sh; put it in .fi_cache/
# for later calls), KICTL_NCU=1 runs
# the script under Nsight Compute (the gpu__time_duration metric, every kernel, CSV to $OUT/<name>.ncu.csv).
set -u
if [ $# -lt 1 ]; then
  echo "usage: bash benchmarks/device.sh SCRIPT [ARGS...] | gpu-tests" >&2
  exit 2
fi
: "${OUT:?device.sh writes under \$OUT, the output folder of the device tool}"
limit=${KICTL_DEVICE_TIMEOUT:-540}
script=$1
shift
if [ "$script" = gpu-tests ]; then
  name=gpu-tests
  cmd=(python3 -m pytest -m gpu -p no:cacheprovider -q -rA tests/bench "$@")
else
  script=benchmarks/${script#benchmarks/}
  [ -f "$script" ] || { echo "device.sh: no such script: $script" >&2; exit 2; }
  name=$(basename "$script" .py)
  part=()
  if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    part=("$1")
    name="$name-$1"
    shift
  fi
  out=()
  case " $* " in *" --out "*) ;; *) [ "${KICTL_DEVICE_NO_OUT:-0}" = 1 ] || out=(--out "$OUT/$name") ;; esac
  [ ${#out[@]} -eq 0 ] || mkdir -p "$OUT/$name"
  cmd=(python3 "$script" "${part[@]}" "${out[@]}" "$@")
  if [ "${KICTL_NCU:-0}" = 1 ]; then
    cmd=(/usr/local/cuda/bin/ncu --target-processes all --cache-control all --clock-control none
      --metrics gpu__time_duration.sum --csv --log-file "$OUT/$name.ncu.csv" "${cmd[@]}")
  fi
fi
. benchmarks/h200_setup.sh >/dev/null || exit 5
export FLASHINFER_WORKSPACE_BASE=$HOME KICTL_SANDBOX_CACHE=$HOME/.cache/flashinfer
# the device's .git is stale: the commit that runs is the one benchmarks/carry.sh wrote into the carried .source/
[ -f .source/kictl.tree ] && export KICTL_SOURCE_MANIFEST=$PWD/.source/kictl.tree
echo "device.sh: ${cmd[*]} (limit ${limit} s)"
timeout "$limit" "${cmd[@]}" >"$OUT/$name.log" 2>&1
status=$?
tail -n 40 "$OUT/$name.log"
if [ "${KICTL_SAVE_FI_CACHE:-0}" = 1 ]; then
  bash benchmarks/fi_cache.sh save "$OUT/fi_cache.txz" || echo "device.sh: FlashInfer's cache not saved" >&2
fi
echo "device.sh: exit $status"
exit "$status"
