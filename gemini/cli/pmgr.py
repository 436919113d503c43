"""gem-pmgr: the pod manager of one client on one GPU (original environment, spec §1.2)."""

from __future__ import annotations

import argparse
import os
import socket
import sys

from gemini.cli._args import (
    add_secret_file,
    add_verbosity,
    expand_verbosity,
    load_secret_arg,
    port,
)
from gemini.core.wire import check_name
from gemini.daemon.lifecycle import run_until_signal
from gemini.daemon.logsetup import setup_logging

EXAMPLE = (
    "example: POD_NAME=client1 POD_MANAGER_PORT=50052 SCHEDULER_IP=127.0.0.1 "
    "SCHEDULER_PORT=50051 gem-pmgr"
)


def build_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(
        prog="gem-pmgr",
        description="Gemini pod manager: shares one client's GPU token and memory limit among "
        "its processes.  Configured by environment variables, as the original; flags override.",
        epilog=EXAMPLE,
    )
    p.add_argument("--name", default=env("POD_NAME") or socket.gethostname(),
                   help="client name, an ID of the config (env POD_NAME, default the host name)")
    p.add_argument("--port", type=port, default=None,
                   help="port for the hooks (env POD_MANAGER_PORT, default 50052; the hook's "
                   "unix:PATH there means --unix PATH)")
    p.add_argument("--ip", default=env("POD_MANAGER_IP", "127.0.0.1"),
                   help="address for the hooks (env POD_MANAGER_IP, default 127.0.0.1)")
    p.add_argument("--scheduler-ip", default=env("SCHEDULER_IP", "127.0.0.1"),
                   help="scheduler address (env SCHEDULER_IP, default 127.0.0.1)")
    p.add_argument("--scheduler-port", type=port, default=env("SCHEDULER_PORT", "50051"),
                   help="scheduler port (env SCHEDULER_PORT, default 50051)")
    p.add_argument("--unix", default=env("POD_MANAGER_SOCKET") or None, metavar="PATH",
                   help="serve the hooks on this Unix socket instead of TCP, mode 0660, only "
                   "for our own uid, root and --allow-uid (env POD_MANAGER_SOCKET)")
    p.add_argument("--allow-uid", type=int, action="append", default=[], metavar="UID",
                   help="another uid whose processes may use the --unix socket (repeatable)")
    p.add_argument("--time-from-grant", action="store_true",
                   default=env("GEMINI_TIME_FROM_GRANT", "") == "1",
                   help="time each token from when the scheduler granted it, not from its "
                   "receipt (by default, no later than the delivery delay the scheduler's "
                   "hand-over waits for): fewer tokens run past the next holder's start, but "
                   "each client loses that delay from every token (env "
                   "GEMINI_TIME_FROM_GRANT=1; off by default)")
    add_secret_file(p, from_env=True)
    add_verbosity(p)
    return p


def hooks_endpoint(args: argparse.Namespace) -> None:
    """--port and --unix where the flags leave them, from POD_MANAGER_PORT as the hook reads
    it: a port, or unix:PATH (a list, one per GPU, is the hook's alone).  ValueError names it."""
    if args.port is not None:
        return
    value = os.environ.get("POD_MANAGER_PORT", "").strip() or "50052"
    path = value.removeprefix("unix:")
    if path != value and "," not in value:
        args.unix = args.unix or path
        args.port = 50052  # (unused: the hooks come over the socket)
        return
    try:
        args.port = port(value)
    except argparse.ArgumentTypeError:
        raise ValueError(f"POD_MANAGER_PORT={value!r} is neither a port nor unix:PATH (a list, "
                         "one per GPU, is for the hook): give --port or --unix") from None


def main(argv: list[str] | None = None) -> int:
    # Every problem with the arguments is a ValueError (a non-numeric port in the environment,
    # WireError for the name, SecretError for the secret file).
    try:
        args = build_parser().parse_args(expand_verbosity(sys.argv[1:] if argv is None else argv))
        hooks_endpoint(args)
        check_name(args.name)
        secret = load_secret_arg("gem-pmgr", args.secret_file)
    except ValueError as exc:
        print(f"gem-pmgr: {exc}", file=sys.stderr)
        return 2
    setup_logging("gem-pmgr", args.verbose)
    from gemini.daemon.podmanager import serve_pod_manager

    try:
        return run_until_signal(
            lambda stop: serve_pod_manager(
                args.name, args.ip, args.port, args.scheduler_ip, args.scheduler_port, stop,
                secret=secret, unix=args.unix, allow_uids=args.allow_uid,
                time_from_grant=args.time_from_grant,
            )
        )
    except OSError as exc:
        where = f"unix:{args.unix}" if args.unix else f"{args.ip}:{args.port}"
        print(f"gem-pmgr: cannot listen on {where}: {exc.strerror or exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
