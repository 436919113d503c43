"""Argument pieces shared by the command-line tools."""

from __future__ import annotations

import argparse


def expand_verbosity(argv: list[str]) -> list[str]:
    """Accept the original `-v N` as well as `-vv`: rewrite `-vv…` as `-v <count>`."""
    out = []
    for arg in argv:
        if len(arg) > 2 and arg.startswith("-v") and set(arg[1:]) == {"v"}:
            out += ["-v", str(len(arg) - 1)]
        else:
            out.append(arg)
    return out


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-v", "--verbose", nargs="?", type=int, const=1, default=0, metavar="N",
        help="more log lines: -v (or -v 1) debug, -vv (or -v 2) everything",
    )
