#!/usr/bin/env bash
# Wheels too large for one device call's carry (64 MiB in all), carried in several calls to one warm machine:
#
#   bash benchmarks/carry_parts.sh split WHEELS BYTES DIR...   every wheel in WHEELS unpacked, the whole packed as
#                                                              one xz tarball and cut in parts of BYTES, the i-th
#                                                              (from 0) into the i-th DIR as part.i, the whole's
#                                                              sha256 into the last DIR as part.sha256; exit 2
#                                                              where the DIRs are too few for the parts
#   bash benchmarks/carry_parts.sh join SITE DIR...            where every part is here and the sha256 holds, the
#                                                              wheels' files unpacked into SITE (as pip --target
#                                                              --no-deps puts them), once per set of parts; nothing
#                                                              where none is here; exit 1 where one is missing or
#                                                              the parts do not make the whole
#
# Why (issue 43): FlashInfer's GDN kernels on Hopper are CuTe DSL kernels, which need nvidia-cutlass-dsl, and its
# CUDA 13 library alone is a 92 MB wheel (a 193 MB MLIR compiler). Unpacked and xz-compressed the set is 69 MB,
# and a call carries 64 MiB in all, counted as a tar of what travels: the checkout's tracked files are 28.5 MiB
# of it (stop 60). The device keeps the ignored files that a call does not name between calls to a warm machine
# (the device tool's README), so after a usual call (which leaves .whl/ and the rest there), one call carries
# each part alone (`true` as its command) and the last carries the last part with the command that needs them,
# each within the 30 s the machine stays warm; h200_setup.sh joins them. benchmarks/carry.sh builds three parts
# (.carry_a, .carry_b, .carry_c) with KICTL_CARRY_CUTLASS=1, and packs the usual wheels as one part in .whl.
set -euo pipefail
case "${1:-}" in
  split)
    [ $# -ge 4 ] || { echo "usage: carry_parts.sh split WHEELS BYTES DIR..." >&2; exit 2; }
    wheels=$2 bytes=$3
    shift 3
    [[ "$bytes" =~ ^[1-9][0-9]*$ ]] || { echo "carry_parts.sh: BYTES must be a whole number above 0, not '$bytes'" >&2; exit 2; }
    dirs=("$@")
    shopt -s nullglob
    found=("$wheels"/*.whl)
    [ ${#found[@]} -gt 0 ] || { echo "carry_parts.sh: no wheel in $wheels" >&2; exit 2; }
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir "$work/raw"
    # unpacked as pip --target --no-deps puts a wheel's files, the executable bit kept (a zip keeps it in the
    # high bits of external_attr; `python3 -m zipfile -e` drops it)
    python3 - "$work/raw" "${found[@]}" <<'PY'
import os
import sys
import zipfile

for wheel in sys.argv[2:]:
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            path = archive.extract(info, sys.argv[1])
            if not info.is_dir() and (info.external_attr >> 16) & 0o111:
                os.chmod(path, 0o755)
PY
    tar cf - -C "$work/raw" . | xz -6 -T0 -c >"$work/whole.txz"
    size=$(stat -c %s "$work/whole.txz")
    needed=$(((size + bytes - 1) / bytes))
    if [ "$needed" -gt ${#dirs[@]} ]; then
      echo "carry_parts.sh: the packed wheels are $size bytes, $needed parts of $bytes, and ${#dirs[@]} folders were named" >&2
      exit 2
    fi
    for i in "${!dirs[@]}"; do
      mkdir -p "${dirs[$i]}"
      rm -f "${dirs[$i]}"/part.*
    done
    sizes=()
    for i in "${!dirs[@]}"; do
      dd if="$work/whole.txz" of="${dirs[$i]}/part.$i" bs=1M iflag=skip_bytes,count_bytes skip=$((i * bytes)) \
        count="$bytes" status=none
      sizes+=("$(stat -c %s "${dirs[$i]}/part.$i") bytes in ${dirs[$i]}")
    done
    sha256sum "$work/whole.txz" | cut -d' ' -f1 >"${dirs[-1]}/part.sha256"
    (IFS=,; echo "carry_parts.sh: ${sizes[*]}")
    ;;
  join)
    [ $# -ge 3 ] || { echo "usage: carry_parts.sh join SITE DIR..." >&2; exit 2; }
    site=$2
    shift 2
    dirs=("$@")
    last=${dirs[-1]}
    present=0
    for i in "${!dirs[@]}"; do
      [ -f "${dirs[$i]}/part.$i" ] && present=$((present + 1))
    done
    [ "$present" -eq 0 ] && exit 0
    if [ "$present" -lt ${#dirs[@]} ] || [ ! -f "$last/part.sha256" ]; then
      echo "carry_parts.sh: a part is missing (${#dirs[@]} expected, $present here): carry ${dirs[*]} each in its own call, one after the other" >&2
      exit 1
    fi
    want=$(cat "$last/part.sha256")
    mkdir -p "$site"
    # one mark per set of parts: the usual wheels (.whl) and nvidia-cutlass-dsl's (.carry_c) join the same site
    mark="$site/.parts.$(basename "$last" | tr -d .)"
    [ "$(cat "$mark" 2>/dev/null)" = "$want" ] && exit 0
    parts=()
    for i in "${!dirs[@]}"; do
      parts+=("${dirs[$i]}/part.$i")
    done
    got=$(cat "${parts[@]}" | sha256sum | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
      echo "carry_parts.sh: the parts in ${dirs[*]} do not make the whole they were split from" >&2
      exit 1
    fi
    cat "${parts[@]}" | xz -d -c | tar xf - -C "$site"
    # bytecode once here: kictl's sandboxed workers import from read-only binds and would compile at every start
    python3 -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    echo "$want" >"$mark"
    ;;
  *)
    echo "usage: carry_parts.sh split WHEELS BYTES DIR... | join SITE DIR..." >&2
    exit 2
    ;;
esac
