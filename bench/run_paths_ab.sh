#!/bin/bash
# An A/B of one gem-schd option on the device, both arms on one machine, one after the other:
#   ONLY="pair:capped 0.3+0.3,pair:capped 0.4+0.5" ON=--shared-turns OFF=--no-shared-turns \
#   TAG=shared-turns [PP=jax] [B=140] [ARGS="--pair-seconds 20"] bench/run_paths_ab.sh
# runs `bench/paths.py --only "$ONLY" [--pair-path $PP] --keep-logs --budget $B $ARGS` with $ON, then
# with $OFF, into $OUT/on and $OUT/off (default bench/results/ab), each result renamed
# <gpu>-<date>-paths-$TAG-{on,off}.{json,md} and -logs.tar.  The device returns at most 8
# files a call: one A/B (6 files) per call.  Set PYTHONPATH to gemini's dependencies first.
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-bench/results/ab}
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for arm in on off; do
    flag=$ON
    [ "$arm" = off ] && flag=$OFF
    mkdir -p "$out/$arm"
    "${PYTHON:-python3}" bench/paths.py --only "$ONLY" ${PP:+--pair-path "$PP"} $flag \
        --keep-logs --budget "${B:-140}" $ARGS --out "$out/$arm"
    for f in "$out/$arm"/*-paths.json "$out/$arm"/*-paths.md "$out/$arm"/*-paths-logs.tar; do
        [ -f "$f" ] || continue
        base=${f%-paths*}
        mv "$f" "$base-paths-${TAG:-ab}-$arm${f#"$base"-paths}"
    done
done
