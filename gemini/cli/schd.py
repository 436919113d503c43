"""gem-schd: the scheduler of one GPU (original flags and defaults, spec §1.1)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gemini.cli._args import (
    add_secret_file,
    add_turns_flags,
    add_verbosity,
    expand_verbosity,
    finite,
    load_secret_arg,
    min_quota_ms,
    one_gpu,
    port,
    shared_turns_of,
    turns_error,
)
from gemini.core.config import DEFAULT_GPU, ConfigError, parse_present_gpus
from gemini.core.scheduler import Timing
from gemini.core.um import DEFAULT_UM_MIN_QUOTA_S, UmPolicy
from gemini.core.units import parse_bytes
from gemini.daemon.lifecycle import run_until_signal
from gemini.daemon.logsetup import setup_logging

EXAMPLE = "example: gem-schd -p /etc/gemini -f resource-config.txt -P 50051 -q 250 -m 100 -w 10000"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gem-schd",
        description="Gemini scheduler: hands out GPU time tokens to clients per the config file.",
        epilog=EXAMPLE,
    )
    p.add_argument("-P", "--port", type=port, default=50051, help="TCP port (default 50051)")
    p.add_argument("--ip", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("-q", "--quota", type=finite, default=250.0, help="base quota, ms (250)")
    p.add_argument("-m", "--min_quota", type=min_quota_ms, default=100.0,
                   help="minimum quota, ms (100; at least 1)")
    p.add_argument("-w", "--window", type=finite, default=10000.0, help="usage window, ms (10000)")
    p.add_argument("--max_quota", type=finite, default=None,
                   help="longest quota, ms (default 4 x --quota); a newcomer waits at most this")
    p.add_argument("--short-window", type=finite, default=1000.0, metavar="MS",
                   help="caps and shares also hold over this window, and no grant is longer "
                   "than a tenth of it, ms (1000; 0: Gemini's own quotas, caps over -w only)")
    p.add_argument("--grace", type=finite, default=5.0,
                   help="ms an expired token holder may take to ask again while it is next (5)")
    um = p.add_argument_group("unified memory (see README: Unified-memory mode)")
    um.add_argument("--unified-memory", action="store_true",
                    help="every client is a unified-memory client (as with 'um' in its line)")
    um.add_argument("--evict-on-release", action="store_true",
                    help="move UM clients' data back to the host when their token ends")
    um.add_argument("--device-memory", type=_size, default=None, metavar="BYTES",
                    help="the card's memory (e.g. 80GiB), for the oversubscription check "
                    "(default: unknown, no check)")
    um.add_argument("--oversubscription", type=finite, default=1.0, metavar="RATIO",
                    help="refuse configs whose UM clients' GPU_MEM add up to more than "
                    "RATIO x --device-memory (1.0)")
    um.add_argument("--um-min-quota", type=finite, default=DEFAULT_UM_MIN_QUOTA_S * 1000,
                    metavar="MS", help="shortest quota of a UM client, ms (1000)")
    p.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                   help="serve Prometheus metrics at http://IP:PORT/metrics (0: any free port)")
    p.add_argument("--metrics-ip", default=None, metavar="IP",
                   help="the address of the metrics page (default: --ip's; 0.0.0.0 where "
                        "Prometheus scrapes from another host, as in a Kubernetes pod)")
    p.add_argument("--gpu", default=DEFAULT_GPU, type=one_gpu,
                   help="serve the config's clients of this GPU (index or UUID, default 0)")
    p.add_argument("--mps-state", type=Path, default=None, metavar="FILE",
                   help="launch-backend's MPS state file: the config's partitions hold tokens "
                   "side by side while it says MPS is up (default: partitions are time-sliced)")
    p.add_argument("--no-clock", dest="clock", action="store_false",
                   help="do not read the GPU's SM clock (NVML): capped clients are charged the "
                   "time they hold, not their work (README: Caps by work)")
    p.add_argument("--shared-speed", action=argparse.BooleanOptionalAction, default=True,
                   help="uncapped clients beside others share by work: each gets short "
                   "calibration grants alone, and is charged its speed (README: Uncapped "
                   "clients beside others share by work; default: on; --no-shared-speed: "
                   "they share by time)")
    p.add_argument("--hand-over-at-arrival", action=argparse.BooleanOptionalAction,
                   default=True,
                   help="hand a holder's GPU on when its hook's token ends: its grant's end "
                   "plus the time its grants take to reach its pod manager, as the pod manager "
                   "reports (up to 2 ms; README: Hand-overs at the grant's arrival; default: "
                   "on; --no-hand-over-at-arrival: at the grant's end, as Gemini does)")
    add_turns_flags(p, passed_on=False)
    p.add_argument("--present-gpus", type=_present_gpus, default=None, metavar="LIST",
                   help="the machine's GPUs as launch-backend found them (INDEX=UUID,...): the "
                   "config's GPUs are checked against them at start and on each edit, as "
                   "launch-backend checks them, so that an edit it refuses is refused here too "
                   "(default: not checked)")
    p.add_argument("-f", "--limit_file", default="resource-config.txt", help="config file name")
    p.add_argument("-p", "--limit_file_dir", default=".", help="directory of the config file")
    add_secret_file(p)
    add_verbosity(p)
    return p


def _present_gpus(text: str) -> list[tuple[int, str]]:
    try:
        present = parse_present_gpus(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not present:  # (every GPU of the config would be refused)
        raise argparse.ArgumentTypeError("names no GPU")
    return present


def _size(text: str) -> int:
    try:
        return parse_bytes(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _settings(args: argparse.Namespace) -> tuple[Timing, UmPolicy, bytes | None]:
    """The daemon's settings from its flags; ValueError (incl. SecretError) says what is wrong."""
    max_quota = 4 * args.quota if args.max_quota is None else args.max_quota
    timing = Timing(args.quota / 1000, args.min_quota / 1000, args.window / 1000,
                    args.grace / 1000, max_quota / 1000, args.short_window / 1000,
                    args.shared_speed, args.hand_over_at_arrival, args.lone_turns,
                    shared_turns_of(args.lone_turns, args.shared_turns))
    if not 0 < timing.min_quota_s <= timing.base_quota_s <= timing.max_quota_s:
        raise ValueError("need 0 < min_quota <= quota <= max_quota")
    if timing.window_s <= 0:
        raise ValueError("need window > 0")
    if not 0 <= timing.short_window_s <= timing.window_s:
        raise ValueError("need 0 <= short-window <= window")
    if error := turns_error(args.lone_turns, args.shared_turns):
        raise ValueError(error)
    um = UmPolicy(args.unified_memory, args.evict_on_release, args.device_memory,
                  args.oversubscription, args.um_min_quota / 1000)
    return timing, um, load_secret_arg("gem-schd", args.secret_file)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(expand_verbosity(sys.argv[1:] if argv is None else argv))
    setup_logging("gem-schd", args.verbose)
    try:
        timing, um, secret = _settings(args)
    except ValueError as exc:
        print(f"gem-schd: {exc}", file=sys.stderr)
        return 2
    path = Path(args.limit_file_dir) / args.limit_file
    from gemini.daemon.scheduler import serve_scheduler

    try:
        return run_until_signal(
            lambda stop: serve_scheduler(path, timing, args.ip, args.port, stop, secret, um,
                                         args.gpu, args.metrics_port, args.mps_state,
                                         args.clock, args.metrics_ip, args.present_gpus)
        )
    except ConfigError as exc:
        print(f"gem-schd: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        metrics = "" if args.metrics_port is None else \
            f" or {args.metrics_ip or args.ip}:{args.metrics_port} (metrics)"
        print(f"gem-schd: cannot listen on {args.ip}:{args.port}{metrics}: {exc.strerror}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
