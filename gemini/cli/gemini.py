"""`gemini`: one command for everything (the original command names keep working too)."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from gemini.cli._args import add_secret_file, load_secret_arg, port_list, positive
from gemini.core.status import render
from gemini.secret import SecretError

DEFAULT_PORT = 50051


def _status_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ip", default="127.0.0.1", help="scheduler address (default 127.0.0.1)")
    p.add_argument("--port", type=port_list, default=[DEFAULT_PORT],
                   help="scheduler port(s), comma-separated: one scheduler per GPU (50051)")
    add_secret_file(p, from_env=True)


def _fetch(ip: str, ports: list[int], secret: bytes | None
           ) -> tuple[dict[int, dict[str, object]], dict[int, str]]:
    """Each scheduler's status, and why each one that did not answer did not: one down (a GPU's
    scheduler restarting, say) hides none of the others."""
    from gemini.client import NotAuthorized, query_status

    snaps, errors = {}, {}
    for port in ports:
        try:
            snaps[port] = query_status(ip, port, secret=secret)
        except NotAuthorized as exc:
            errors[port] = f"{ip}:{port}: {exc}"
        except OSError as exc:
            errors[port] = (f"cannot reach the scheduler at {ip}:{port}: {exc}. Is gem-schd "
                            "running (tools/launch-backend.py)?")
    return snaps, errors


def _secret(prog: str, path: str | None) -> bytes | None:
    """--secret-file's secret; exits with a clear line when the file is unusable."""
    try:
        return load_secret_arg(prog, path)
    except SecretError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def cmd_status(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gemini status", description="Show each client's share, token and memory, per GPU.",
        epilog="example: gemini status --port 50051,50061 --json",
    )
    _status_args(p)
    p.add_argument("--json", action="store_true", help="print JSON for scripts")
    args = p.parse_args(argv)
    secret = _secret("gemini status", args.secret_file)
    snaps, errors = _fetch(args.ip, args.port, secret)
    if args.json and snaps:
        print(json.dumps({str(port): snap for port, snap in snaps.items()}, indent=1))
    elif snaps:
        print("\n\n".join(render(s, f"GPU scheduler :{port}  ") for port, s in snaps.items()))
    for error in errors.values():
        print(f"gemini status: {error}", file=sys.stderr)
    return 1 if errors else 0


@contextlib.contextmanager
def _keys() -> Iterator[Callable[[float], str]]:
    """`pressed(seconds)`: waits that long, or until a key comes, and returns it ("" for none).
    On a terminal, keys come one by one (no Enter needed); elsewhere none come: it only waits."""
    if not sys.stdin.isatty():
        yield lambda seconds: time.sleep(seconds) or ""
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd)

    def pressed(seconds: float) -> str:
        ready, _, _ = select.select([fd], [], [], seconds)
        return os.read(fd, 1).decode(errors="replace") if ready else ""

    try:
        yield pressed
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def cmd_top(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gemini top", description="Live view of the shares, refreshed (q or Ctrl-C quits).",
        epilog="example: gemini top --interval 0.5",
    )
    _status_args(p)
    p.add_argument("--interval", type=positive, default=1.0, help="seconds between refreshes (1)")
    p.add_argument("--count", type=int, default=0, help="stop after this many refreshes (0: never)")
    args = p.parse_args(argv)
    secret = _secret("gemini top", args.secret_file)
    shown = 0
    try:
        with _keys() as pressed:
            while True:
                snaps, errors = _fetch(args.ip, args.port, secret)
                text = "\n\n".join(
                    [render(s, f"GPU scheduler :{port}  ", with_bars=True)
                     for port, s in snaps.items()] + list(errors.values()))
                sys.stdout.write("\x1b[H\x1b[2J" + time.strftime("%T  gemini top\n") + text + "\n")
                sys.stdout.flush()
                shown += 1
                if args.count and shown >= args.count:  # (as status: 1 if one did not answer)
                    return 1 if errors else 0
                if pressed(args.interval) == "q":
                    return 0
    except KeyboardInterrupt:
        return 0


def cmd_check_config(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gemini check-config",
        description="Validate a resource config (text or YAML) and print what it would apply, "
        "per GPU; GPUs are checked against nvidia-smi's list when it answers.",
        epilog="example: gemini check-config resource-config.txt",
    )
    p.add_argument("file", type=Path)
    args = p.parse_args(argv)
    from gemini.core.config import ConfigError, gpu_problems
    from gemini.daemon.gpus import present_gpus
    from gemini.daemon.watcher import read_config

    try:
        config = read_config(args.file)
    except ConfigError as exc:
        print(f"invalid: {exc}", file=sys.stderr)
        return 1
    print(f"{args.file}: {len(config.names)} clients on {len(config.gpus)} GPU(s)")
    for gpu in config.gpus:
        parts = config.partitions(gpu)
        sizes = ", ".join(f"{p.name} {p.sm}%" for p in parts)
        print(f"  GPU {gpu}:" + (f" partitions (MPS) {sizes}" if parts else ""))
        for c in config.for_gpu(gpu).clients:
            um = ", unified memory" if c.unified_memory else ""
            part = "" if c.partition is None else f", in partition {c.partition.name}"
            print(f"    {c.name}: request {c.request:g}, limit {c.limit:g}, "
                  f"memory {c.gpu_mem:,} B ({c.gpu_mem / 2**30:.2f} GiB){um}{part}")
    present = present_gpus()
    if present is None:
        print("GPUs not checked: nvidia-smi did not answer")
        return 0
    problems = gpu_problems(config, present)
    for line in problems:
        print(f"invalid: {args.file}: {line}", file=sys.stderr)
    return 1 if problems else 0


def cmd_secret(argv: list[str]) -> int:
    p = argparse.ArgumentParser(
        prog="gemini secret",
        description="Make a shared-secret file (32 random hex digits, mode 0600) for "
        "--secret-file / GEMINI_SECRET_FILE.",
        epilog="example: gemini secret --out /etc/gemini/secret",
    )
    p.add_argument("--out", type=Path, required=True, help="the file to create")
    p.add_argument("--force", action="store_true", help="replace an existing file")
    args = p.parse_args(argv)
    from gemini.secret import create_secret_file

    try:
        create_secret_file(args.out, force=args.force)
    except FileExistsError:
        print(f"gemini secret: {args.out} exists (--force replaces it)", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"gemini secret: cannot write {args.out}: {exc.strerror}", file=sys.stderr)
        return 1
    print(f"wrote a new secret to {args.out} (mode 0600)")
    return 0


def _delegate(module: str) -> Callable[[list[str]], int]:
    def run(argv: list[str]) -> int:
        import importlib

        main: Callable[[list[str]], int] = importlib.import_module(module).main
        return main(argv)

    return run


COMMANDS: dict[str, tuple[Callable[[list[str]], int], str]] = {
    "schd": (_delegate("gemini.cli.schd"), "run the scheduler of one GPU (= gem-schd)"),
    "pmgr": (_delegate("gemini.cli.pmgr"), "run the pod manager of one client (= gem-pmgr)"),
    "launch-backend": (_delegate("gemini.cli.launch_backend"),
                       "start a scheduler and a pod manager per client"),
    "launch-command": (_delegate("gemini.cli.launch_command"), "run a program under the hook"),
    "status": (cmd_status, "show shares, tokens and memory"),
    "top": (cmd_top, "the same, live"),
    "trace": (_delegate("gemini.cli.trace"), "record token grants to a Chrome trace and a PNG"),
    "check-config": (cmd_check_config, "validate a config file"),
    "secret": (cmd_secret, "make a shared-secret file for --secret-file"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print("usage: gemini COMMAND [ARGS]  (gemini COMMAND --help for more)\n\ncommands:")
        for name, (_, text) in COMMANDS.items():
            print(f"  {name:15} {text}")
        print("\nexample: gemini status")
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    run, _ = COMMANDS[argv[0]]
    return run(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
