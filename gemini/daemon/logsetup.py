"""The one place that configures logging: one line per event, `-v` for more."""

from __future__ import annotations

import logging
import sys
import time


def setup_logging(program: str, verbosity: int) -> None:
    level = logging.WARNING - 10 * max(0, min(verbosity + 1, 2))  # default INFO, -v DEBUG
    handler = logging.StreamHandler(sys.stderr)
    stamp = ""
    if level <= logging.DEBUG:
        # Debug lines also carry CLOCK_MONOTONIC seconds, the hook's clock in its own debug
        # lines: a token's way from the scheduler through the pod manager to the hook can then
        # be lined up to the microsecond.
        handler.addFilter(_stamp_monotonic)
        stamp = "[%(monotonic).6f] "
    handler.setFormatter(logging.Formatter(
        f"%(asctime)s.%(msecs)03d {program} %(levelname)s {stamp}%(message)s", "%F %T"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # watchdog logs every file event at DEBUG; keep those out unless asked twice.
    logging.getLogger("watchdog").setLevel(logging.DEBUG if verbosity > 1 else logging.WARNING)


def _stamp_monotonic(record: logging.LogRecord) -> bool:
    record.monotonic = time.monotonic()  # (the handler runs in the logging call itself)
    return True
