"""Argument pieces shared by the command-line tools."""

from __future__ import annotations

import argparse
import os
import sys

from gemini.secret import ENV, load_optional, world_readable


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


def add_secret_file(parser: argparse.ArgumentParser, from_env: bool = False) -> None:
    """--secret-file; `from_env`: default to GEMINI_SECRET_FILE, as the hook does."""
    parser.add_argument(
        "--secret-file", default=secret_default() if from_env else None, metavar="PATH",
        help="shared secret (32 hex digits; make one with `gemini secret --out PATH`): "
        "prove it to the daemons, and require it from clients when serving"
        + (f" (env {ENV})" if from_env else ""),
    )


def secret_default() -> str | None:
    """The secret file named by the environment (GEMINI_SECRET_FILE), as the hook reads it."""
    return os.environ.get(ENV) or None


def load_secret_arg(prog: str, path: str | None) -> bytes | None:
    """The secret of --secret-file (None without one); warns when anybody may read the file.
    Raises gemini.secret.SecretError, whose message names the file and the problem."""
    secret = load_optional(path)
    if path and world_readable(path):
        print(f"{prog}: warning: every user can read {path}; chmod 600 it", file=sys.stderr)
    return secret
