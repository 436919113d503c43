#!/bin/bash
# An A/B of one gem-schd option on the device, both arms on one machine, one after the other:
#   ONLY="pair:capped 0.3+0.3,pair:capped 0.4+0.5" ON=--shared-turns OFF=--no-shared-turns \
#   TAG=shared-turns [PP=jax] [B=140] [ARGS="--pair-seconds 20"] [ARMS="on off on2"] \
#   [PACK=$OUT/name.tar] bench/run_paths_ab.sh
# runs `bench/paths.py --only "$ONLY" [--pair-path $PP] --keep-logs --budget $B $ARGS` once per
# arm of $ARMS (default "on off"; an arm named off* runs with $OFF, any other with $ON), into
# $OUT/<arm> (default bench/results/ab), each result renamed
# <gpu>-<date>-paths-$TAG-<arm>.{json,md} and -logs.tar.  The device returns at most 8 files a
# call: PACK packs all the arms' files into one tar, so that several A/Bs fit in one call.
# Set PYTHONPATH to gemini's dependencies first.
cd "$(dirname "$0")/.." || exit 1
out=${OUT:-bench/results/ab}
[ -n "$PACK" ] && out=$(mktemp -d)
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
for arm in ${ARMS:-on off}; do
    flag=$ON
    case $arm in off*) flag=$OFF ;; esac
    mkdir -p "$out/$arm"
    "${PYTHON:-python3}" bench/paths.py --only "$ONLY" ${PP:+--pair-path "$PP"} $flag \
        --keep-logs --budget "${B:-140}" $ARGS --out "$out/$arm"
    for f in "$out/$arm"/*-paths.json "$out/$arm"/*-paths.md "$out/$arm"/*-paths-logs.tar; do
        [ -f "$f" ] || continue
        base=${f%-paths*}
        mv "$f" "$base-paths-${TAG:-ab}-$arm${f#"$base"-paths}"
    done
done
if [ -n "$PACK" ]; then
    tar -cf "$PACK" -C "$out" . && rm -rf "$out"
fi
