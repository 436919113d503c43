#!/bin/sh
# Build libgemhook.so.1 with plain cc, the same command as gemini.native._build.build_hook
# (no cffi needed), minus -Werror so that a newer compiler's new warning cannot stop a benchmark.
#   bench/build_hook.sh [OUT_DIR]      (default bench/.build)
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/bench/.build}
mkdir -p "$OUT"
MAP=""
[ -f "$ROOT/csrc/hook/libgemhook.map" ] && MAP="-Wl,--version-script=$ROOT/csrc/hook/libgemhook.map"
# shellcheck disable=SC2086
${CC:-cc} -std=gnu11 -O2 -g -fPIC -Wall -Wextra "-I$ROOT/csrc/include" -shared \
    -Wl,-soname,libgemhook.so.1 -o "$OUT/libgemhook.so.1" \
    "$ROOT"/csrc/hook/*.c "$ROOT"/csrc/common/*.c \
    -fvisibility=hidden -Wl,-z,defs -Wl,-z,now $MAP -ldl -lpthread -lrt
echo "$OUT/libgemhook.so.1"
