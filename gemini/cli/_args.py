"""Argument pieces shared by the command-line tools."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable
from typing import TypeVar

from gemini.core.config import parse_gpu
from gemini.secret import ENV, load_optional, world_readable

T = TypeVar("T")


def port_list(text: str) -> list[int]:
    """`--port A,B`: one port per GPU (or per scheduler), comma-separated, each 1 to 65535."""
    try:
        ports = [int(p) for p in text.split(",") if p.strip()]
    except ValueError:
        ports = []
    if not ports or not all(0 < p <= 65535 for p in ports):
        raise argparse.ArgumentTypeError(f"{text!r} is not a port or a list of ports (1 to 65535)")
    return ports


def _checked(text: str, convert: Callable[[str], T], valid: Callable[[T], bool], says: str) -> T:
    """`convert(text)` where it converts and is `valid`; else argparse's error, `text` `says`."""
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} {says}") from None
    if not valid(value):
        raise argparse.ArgumentTypeError(f"{text!r} {says}")
    return value


def finite(text: str) -> float:
    """A number flag: `inf` and `nan` are no durations or ratios (float() takes both)."""
    return _checked(text, float, math.isfinite, "is not a finite number")


def positive(text: str) -> float:
    """A finite number above 0 (an interval, a bin: 0 or less would spin or divide by 0)."""
    return _checked(text, finite, lambda v: v > 0, "is not above 0")


# The shortest minimum quota, ms: a few token round trips on one box.  (-m 0.001: tokens of
# 1-2 us expired before a launch could go, and the hook asked for the next one and the next,
# 48,208 in 20 s, launching nothing.)
MIN_QUOTA_FLOOR_MS = 1.0


def min_quota_ms(text: str) -> float:
    """gem-schd's -m (and the launchers', which pass it on): at least MIN_QUOTA_FLOOR_MS."""
    return _checked(text, finite, lambda v: v >= MIN_QUOTA_FLOOR_MS,
                    f"is under {MIN_QUOTA_FLOOR_MS:g} ms: a shorter token ends before a "
                    "launch can use it")


def port(text: str) -> int:
    """A port to listen on: 0 (any free one) to 65535 (above, it wrapped: 70000 was 4464)."""
    return _checked(text, int, lambda v: 0 <= v <= 65535, "is not a port (0 to 65535)")


def gpu_list(text: str) -> tuple[str, ...]:
    """`--gpu(s) G[,G]`: GPUs spelled as the config spells them ("01" is GPU 1)."""
    try:
        return tuple(parse_gpu(g) for g in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def one_gpu(text: str) -> str:
    gpus = gpu_list(text)
    if len(gpus) != 1:
        raise argparse.ArgumentTypeError(f"one GPU, not {text!r}")
    return gpus[0]


def add_turns_flags(p: argparse.ArgumentParser, who: str = "client",
                    lone_default: bool = True, passed_on: bool = True) -> None:
    """gem-schd's --[no-]lone-turns and --[no-]shared-turns, as gem-schd declares them or as a
    launcher that passes them on to it (`passed_on`); `who`: what the launcher calls a client."""
    lone, shared = ((" (gem-schd --[no-]lone-turns; default: on)",
                     " (gem-schd --[no-]shared-turns; default: on where lone turns are)")
                    if passed_on else
                    (", each grant as long as a calibration, so that its 1 s windows hold "
                     "(README: Alone, a cap in turns of a whole part of the second; default: "
                     "on; --no-lone-turns: its limit's part of 100 ms turns)",
                     ", all in the same (README: Capped neighbours in shared turns; default: on "
                     "where lone turns are; --no-shared-turns: each in 100 ms turns)"))
    p.add_argument("--lone-turns", action=argparse.BooleanOptionalAction, default=lone_default,
                   help=f"a capped {who} alone is paced in turns of a whole part of the short "
                   f"window{lone}")
    p.add_argument("--shared-turns", action=argparse.BooleanOptionalAction, default=None,
                   help=f"with lone turns, capped {who}s side by side share such turns{shared}")


def turns_error(lone_turns: bool, shared_turns: bool | None) -> str | None:
    """What is wrong with gem-schd's --[no-]lone-turns and --[no-]shared-turns together (None:
    nothing; `shared_turns` None: not given): launch-backend refuses it before it starts any
    daemon, as gem-schd would."""
    if shared_turns and not lone_turns:
        return "--shared-turns needs lone turns (drop --no-lone-turns)"
    return None


def shared_turns_of(lone_turns: bool, shared_turns: bool | None) -> bool:
    """gem-schd's shared turns: as asked, or where not asked, on with lone turns."""
    return lone_turns if shared_turns is None else shared_turns


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
