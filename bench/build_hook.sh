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
# Loadable on an older glibc where this one names libdl.so.2 (csrc/hook/glibc_compat.h).
COMPAT="" LIBS="-ldl -lpthread -lrt"
case $(${CC:-cc} -print-file-name=libdl.so.2) in /*)
    COMPAT="-include $ROOT/csrc/hook/glibc_compat.h"
    LIBS="-Wl,--push-state,--no-as-needed -l:libdl.so.2 -l:libpthread.so.0 -Wl,--pop-state -lrt"
esac
# shellcheck disable=SC2086
${CC:-cc} -std=gnu11 -O2 -g -fPIC -Wall -Wextra "-I$ROOT/csrc/include" -shared \
    -Wl,-soname,libgemhook.so.1 -o "$OUT/libgemhook.so.1" \
    "$ROOT"/csrc/hook/*.c "$ROOT"/csrc/common/*.c $COMPAT \
    -fvisibility=hidden -Wl,-z,defs -Wl,-z,now $MAP $LIBS
echo "$OUT/libgemhook.so.1"
