#!/usr/bin/env bash
# FlashInfer's JIT-built kernels from one device call to the next (the lent GPU machine starts bare):
#
#   bash benchmarks/fi_cache.sh save FILE           $HOME/.cache/flashinfer's built modules (*.so) and kictl's list
#                                                   of them (kictl-built-keys.json) into FILE, an xz tarball
#   bash benchmarks/fi_cache.sh restore DIR SITE    every .txz and .tgz in DIR unpacked into $HOME, the files made
#                                                   newer than the just-installed wheels, and each module installed
#                                                   as a FlashInfer AOT kernel under SITE/flashinfer/data/aot
#
# device.sh saves (KICTL_SAVE_FI_CACHE=1) and h200_setup.sh restores (.fi_cache/, /tmp/site). Only the modules
# travel: FlashInfer loads an installed AOT kernel without ninja, so no object file or generated source is needed,
# and the whole carry must stay under the device tool's 64 MiB (the whole cache was 7.4 MB, the modules 2.0 MB).
# Either kind of file may be missing from DIR: stop 58's first call restored nothing when one was (`ls` failed on
# the missing kind) and rebuilt FlashInfer's prefill and decode modules, 130 s of device time.
set -euo pipefail
cache=.cache/flashinfer
case "${1:-}" in
  save)
    [ $# -eq 2 ] || { echo "usage: fi_cache.sh save FILE" >&2; exit 2; }
    out=$(realpath -m "$2")
    cd "$HOME"
    if [ -d "$cache" ]; then
      find "$cache" \( -name '*.so' -o -name kictl-built-keys.json \) | sort | tar cJf "$out" -T -
    else
      tar cJf "$out" --files-from /dev/null
    fi
    ;;
  restore)
    [ $# -eq 3 ] || { echo "usage: fi_cache.sh restore DIR SITE" >&2; exit 2; }
    shopt -s nullglob
    archives=("$2"/*.txz "$2"/*.tgz)
    [ ${#archives[@]} -gt 0 ] || exit 0
    # a warm machine keeps $HOME between calls: the list of what an earlier call built there (benchmarks/
    # catalogue.py's estimates read it) is merged with the carried one, not overwritten by it (stop 60's second
    # call planned a build, 75 s, for every module its first call had built)
    keys="$HOME/$cache/kictl-built-keys.json"
    before=$(cat "$keys" 2>/dev/null || true)
    for archive in "${archives[@]}"; do
      tar xf "$archive" -C "$HOME"
    done
    [ -d "$HOME/$cache" ] || exit 0
    if [ -n "$before" ]; then
      python3 - "$keys" "$before" <<'PY'
import json
import sys


def listed(text):
    try:
        found = json.loads(text)
    except ValueError:
        return set()
    return {item for item in found if isinstance(item, str)} if isinstance(found, list) else set()


path, before = sys.argv[1], sys.argv[2]
try:
    with open(path) as file:
        now = file.read()
except OSError:
    now = "[]"
with open(path, "w") as file:
    file.write(json.dumps(sorted(listed(now) | listed(before)), indent=0))
PY
    fi
    # the wheels were just installed, so their sources are newer than the cached builds: make the builds newer
    # again, or ninja rebuilds every kernel (in every sandboxed worker's private copy of the cache)
    find "$HOME/$cache" -type f -exec touch {} +
    # FlashInfer runs ninja on every JIT module load, and inside kictl's sandbox ninja rebuilt the prefill module
    # (85 s, in every worker's private copy: device call F). Installed AOT kernels, which FlashInfer loads without
    # ninja (what the flashinfer-jit-cache package provides), avoid that: install the cached builds as such.
    for so in "$HOME/$cache"/*/*/cached_ops/*/*.so; do
      name=$(basename "$(dirname "$so")")
      mkdir -p "$3/flashinfer/data/aot/$name" && cp "$so" "$3/flashinfer/data/aot/$name/"
    done
    ;;
  *)
    echo "usage: fi_cache.sh save FILE | restore DIR SITE" >&2
    exit 2
    ;;
esac
