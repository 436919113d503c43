#!/bin/bash
# The device tool carries the working tree to the GPU machine, 64 MiB at most, and the logs
# that bench/results keeps (tracked *-logs.tar.xz) are more than that:
#   bench/device_logs.sh aside   before a device call: moves them to $HOLD
#   bench/device_logs.sh back    once the call has answered: puts them back, and checks that
#                                git sees nothing under bench/results changed
# HOLD defaults to /tmp/gemini-held-logs.  While they are aside git sees them deleted: commit
# named files only (never `git commit -a`), and do not edit the tree while a call uploads.
set -euo pipefail
cd "$(dirname "$0")/.."
hold=${HOLD:-/tmp/gemini-held-logs}
case ${1:-} in
aside)
    mkdir -p "$hold"
    n=0
    while IFS= read -r f; do
        [ -f "$f" ] || continue
        mv -f "$f" "$hold/"
        n=$((n + 1))
    done < <(git ls-files 'bench/results/*-logs.tar.xz')
    echo "$n logs moved to $hold"
    ;;
back)
    [ -d "$hold" ] || { echo "nothing held in $hold" >&2; exit 1; }
    n=0
    while IFS= read -r f; do
        name=$(basename "$f")
        if [ ! -f "$f" ] && [ -f "$hold/$name" ]; then
            cp "$hold/$name" "$f"
            chmod 644 "$f"
            n=$((n + 1))
        fi
    done < <(git ls-files 'bench/results/*-logs.tar.xz')
    echo "$n logs put back"
    missing=$(git status --porcelain -- bench/results | grep '^ D' || true)
    if [ -n "$missing" ]; then
        echo "still missing:" >&2
        echo "$missing" >&2
        exit 1
    fi
    ;;
*)
    echo "usage: $0 aside|back" >&2
    exit 2
    ;;
esac
