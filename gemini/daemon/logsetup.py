"""The one place that configures logging: one line per event, `-v` for more."""

from __future__ import annotations

import logging
import sys


def setup_logging(program: str, verbosity: int) -> None:
    level = logging.WARNING - 10 * max(0, min(verbosity + 1, 2))  # default INFO, -v DEBUG
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter(f"%(asctime)s.%(msecs)03d {program} %(levelname)s %(message)s", "%F %T")
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # watchdog logs every file event at DEBUG; keep those out unless asked twice.
    logging.getLogger("watchdog").setLevel(logging.DEBUG if verbosity > 1 else logging.WARNING)
