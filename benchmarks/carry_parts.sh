#!/usr/bin/env bash
# Wheels too large for one device call's carry (64 MiB in all), carried in two calls to one warm machine:
#
#   bash benchmarks/carry_parts.sh split WHEELS BYTES A B   every wheel in WHEELS unpacked, the whole packed as one
#                                                           xz tarball, its first BYTES into A/part.0, the rest into
#                                                           B/part.1, and the whole's sha256 into B/part.sha256
#   bash benchmarks/carry_parts.sh join SITE A B            where both parts are here and the sha256 holds, the
#                                                           wheels' files unpacked into SITE (as pip --target
#                                                           --no-deps puts them), once per set of parts; nothing
#                                                           where neither is here; exit 1 where one is missing or
#                                                           the parts do not make the whole
#
# Why (issue 43): FlashInfer's GDN kernels on Hopper are CuTe DSL kernels, which need nvidia-cutlass-dsl, and its
# CUDA 13 library alone is a 92 MB wheel (a 193 MB MLIR compiler). Unpacked and xz-compressed the set is 69 MB,
# and a call carries 64 MiB in all, the checkout's tracked files (20 MiB) included. The device keeps the ignored
# files that a call does not name between calls to a warm machine (the device tool's README), so after a usual
# call (which leaves .whl/ and the rest there), one call carries A alone (`true` as its command) and the next B,
# each within the 30 s the machine stays warm; h200_setup.sh joins them. benchmarks/carry.sh builds A and B with
# KICTL_CARRY_CUTLASS=1.
set -euo pipefail
case "${1:-}" in
  split)
    [ $# -eq 5 ] || { echo "usage: carry_parts.sh split WHEELS BYTES A B" >&2; exit 2; }
    wheels=$2 bytes=$3 a=$4 b=$5
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
    mkdir -p "$a" "$b"
    rm -f "$a"/part.* "$b"/part.*
    head -c "$bytes" "$work/whole.txz" >"$a/part.0"
    tail -c +"$((bytes + 1))" "$work/whole.txz" >"$b/part.1"
    sha256sum "$work/whole.txz" | cut -d' ' -f1 >"$b/part.sha256"
    echo "carry_parts.sh: $(du -b "$a/part.0" | cut -f1) bytes in $a, $(du -b "$b/part.1" | cut -f1) in $b"
    ;;
  join)
    [ $# -eq 4 ] || { echo "usage: carry_parts.sh join SITE A B" >&2; exit 2; }
    site=$2 a=$3 b=$4
    if [ ! -f "$a/part.0" ] && [ ! -f "$b/part.1" ]; then
      exit 0
    fi
    if [ ! -f "$a/part.0" ] || [ ! -f "$b/part.1" ] || [ ! -f "$b/part.sha256" ]; then
      echo "carry_parts.sh: one part is missing ($a/part.0, $b/part.1): carry $a alone in a call, then $b in the next" >&2
      exit 1
    fi
    want=$(cat "$b/part.sha256")
    mkdir -p "$site"
    # one mark per set of parts: the usual wheels (.whl) and nvidia-cutlass-dsl's (.carry_b) join the same site
    mark="$site/.parts.$(basename "$b" | tr -d .)"
    [ "$(cat "$mark" 2>/dev/null)" = "$want" ] && exit 0
    got=$(cat "$a/part.0" "$b/part.1" | sha256sum | cut -d' ' -f1)
    if [ "$got" != "$want" ]; then
      echo "carry_parts.sh: the parts in $a and $b do not make the whole they were split from" >&2
      exit 1
    fi
    cat "$a/part.0" "$b/part.1" | xz -d -c | tar xf - -C "$site"
    # bytecode once here: kictl's sandboxed workers import from read-only binds and would compile at every start
    python3 -m compileall -q -j 0 "$site" >/dev/null 2>&1 || true
    echo "$want" >"$mark"
    ;;
  *)
    echo "usage: carry_parts.sh split WHEELS BYTES A B | join SITE A B" >&2
    exit 2
    ;;
esac
