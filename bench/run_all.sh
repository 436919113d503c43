#!/bin/sh
# One entry point for the device: builds the hook (cc) and the CUDA probes (nvcc), runs every
# check and benchmark, writes $OUT/<gpu>-<date>.{json,md,png}.  Arguments go to run_all.py
# (--fake for a dry run on the fake driver, --only S3,S4 for a subset).
cd "$(dirname "$0")/.." || exit 1
exec "${PYTHON:-python3}" bench/run_all.py "$@"
