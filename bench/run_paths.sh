#!/bin/sh
# Issue 12 on the device: builds the hook (cc) and runs bench/paths.py (every kind of program:
# bare vs alone under the hook, a 0.4 cap over 60 s, shares of pairs, the token round trip);
# writes $OUT/<gpu>-<date>-paths.{json,md}.  Arguments go to paths.py (--only, --budget, --merge;
# --plan prints the estimated time of a selection without running it).
cd "$(dirname "$0")/.." || exit 1
exec "${PYTHON:-python3}" bench/paths.py "$@"
