"""launch-command: run one program under the Gemini hook, as a client of a pod manager (spec §1.5).

Fixed against the original: the command runs as a list argv with no shell (the original passed a
list with `shell=True`, so only argv[0] reached the program); the hook path comes from the
installed package instead of `$HOME/gemini/lib`; an existing LD_PRELOAD is kept after the hook; and
the exit code is the program's (128 + N when signal N ended it, as shells report it).

A client of a spatial partition (issue 13), found with --config, gets its MPS environment while
launch-backend's MPS serves (pipe directory, its partition's SM percentage, its memory limit as
MPS's own fence beside the hook's), and runs time-sliced otherwise; one line says which.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from types import FrameType

from gemini.cli._args import gpu_list, port, port_list, positive
from gemini.core.config import ClientSpec, ConfigError
from gemini.core.launch import parse_placement, placed, placement_name, plan_command, socket_path
from gemini.core.mps import MpsPaths, client_env, default_dir
from gemini.daemon.mps import read_state
from gemini.daemon.watcher import read_config
from gemini.native import NativeBuildMissing, hook_library_path
from gemini.secret import load_secret

PROG = "launch-command"
GRACE_S = 5.0
_POLL_S = 1.0
EXIT_USAGE = 2
EXIT_NOT_FOUND = 127
EXAMPLE = f"""examples:
  tools/{PROG}.py --name client1 --port 50052 -- python train.py --epochs 3
  tools/{PROG}.py --name client1 --gpus 0,1 --port 50052,50055 -- python train.py
  tools/{PROG}.py --name client1 --config resource-config.txt -- python train.py"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description="Run COMMAND with the Gemini hook preloaded, talking to the pod manager "
        "of client NAME.",
        epilog=EXAMPLE,
    )
    p.add_argument("--name", required=True, help="client name (POD_NAME), an ID of the config")
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--port", type=port_list,
                       help="the client's pod manager port; with --gpus one per GPU, "
                       "comma-separated, in the same order")
    where.add_argument("--config", metavar="FILE",
                       help="find the client's GPUs and pod manager ports in launch-backend's "
                       "config, where the running launch-backend put them (its placement file "
                       "in the temporary directory; --backend-port is its --port)")
    where.add_argument("--unix", metavar="PATH",
                       help="the pod manager's Unix socket (gem-pmgr --unix), instead of --port")
    p.add_argument("--gpus", type=gpu_list, default=(),
                   help="the client's GPUs (indices or UUIDs, comma-separated): the only ones "
                   "the command sees (CUDA_VISIBLE_DEVICES)")
    p.add_argument("--backend-port", type=port, default=50051,
                   help="launch-backend's --port, with --config (default 50051)")
    p.add_argument("--unix-dir", metavar="DIR",
                   help="with --config: the pod managers are on launch-backend --unix DIR's "
                   "sockets")
    p.add_argument("--mps-dir", metavar="DIR",
                   help="with --config, for a client of a partition: launch-backend's --mps-dir "
                   "(default: as launch-backend's, from --backend-port)")
    p.add_argument("--secret-file", metavar="PATH",
                   help="shared secret the hook proves to the pod manager (GEMINI_SECRET_FILE)")
    p.add_argument("--ip", default="127.0.0.1", help="pod manager address (default 127.0.0.1)")
    p.add_argument("--timeout", type=positive, default=None, metavar="SECONDS",
                   help="stop the command's process group after this many seconds")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="COMMAND...")
    return p


def _from_config(
    path: str, name: str, backend_port: int
) -> tuple[list[int], tuple[str, ...], tuple[ClientSpec, ...]]:
    """The client's pod manager ports and GPUs as launch-backend placed them (its placement
    file; else as at launch), and its specs in the same order."""
    config = read_config(Path(path))
    running = _running_placement(backend_port)
    if running is None:  # (said: a wrong --backend-port sent programs to another's daemons)
        print(f"{PROG}: no launch-backend --port {backend_port} says where its pod managers "
              f"are: ports as {path}'s order places them", file=sys.stderr)
    where = placed(config, backend_port, name, running or {})
    if not where:
        raise ValueError(f"{path} has no client {name!r} (clients: {', '.join(config.names)})")
    missing = [gpu for gpu, _ in where if running and (name, gpu) not in running]
    if missing:  # (its port by the config's order is another client's, or none's)
        raise ValueError(
            f"the launch-backend on --port {backend_port} runs no pod manager for {name!r} on "
            f"GPU {', '.join(missing)}: added while it did not follow {path} (--no-follow), "
            f"or just now (its pod manager still starting: try again)")
    # GPU 0 too is made the only one the program sees: a GPU it may not use would only make
    # frameworks that open every visible GPU (JAX) fail.
    specs = {c.gpu: c for c in config.of_client(name)}
    return ([port for _, port in where], tuple(gpu for gpu, _ in where),
            tuple(specs[gpu] for gpu, _ in where))


def _running_placement(backend_port: int) -> dict[tuple[str, str], int] | None:
    """Where the running launch-backend put its pod managers (None: no file says; {}: one
    that cannot be read)."""
    path = os.path.join(tempfile.gettempdir(), placement_name(os.getuid(), backend_port))
    try:
        return parse_placement(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        print(f"{PROG}: {path} unreadable ({exc}): ports as the config places them",
              file=sys.stderr)
        return {}


def _mps_env(args: argparse.Namespace, specs: tuple[ClientSpec, ...]) -> dict[str, str]:
    """A partition's client: its MPS environment while MPS serves; one line says its mode."""
    if not specs or specs[0].partition is None:
        return {}
    root = args.mps_dir or default_dir(tempfile.gettempdir(), os.getuid(), args.backend_port)
    env, mode = client_env(specs, read_state(MpsPaths(os.path.abspath(root)).state_file))
    print(f"{PROG}: {args.name} runs {mode}", file=sys.stderr, flush=True)
    return env


def exit_code(returncode: int) -> int:
    """A Popen returncode as a shell would report it: -N (killed by signal N) -> 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def stop_group(proc: subprocess.Popen[bytes], grace_s: float = GRACE_S) -> None:
    """SIGTERM to the child's whole group, SIGKILL if the child outlives the grace period."""
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(proc, signal.SIGKILL)
        proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    # The group outlives its leader when grandchildren remain; ESRCH means nobody is left.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def _forward_signals(proc: subprocess.Popen[bytes]) -> dict[int, object]:
    """Ctrl-C / SIGTERM / SIGHUP (a closed terminal) -> SIGTERM to the child's group; a second
    one -> SIGKILL."""
    count = [0]

    def forward(signum: int, frame: FrameType | None) -> None:
        count[0] += 1
        _signal_group(proc, signal.SIGTERM if count[0] == 1 else signal.SIGKILL)

    return {sig: signal.signal(sig, forward)
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def _absolute(path: str | None) -> str | None:
    # The command may change directory before the hook reads the file.
    return os.path.abspath(path) if path else None


def _unused_options(args: argparse.Namespace) -> str | None:
    """Why an option given would do nothing here (else it was silently ignored), or None."""
    if args.config and args.gpus:
        return "--gpus with --config: the config says the client's GPUs"
    if not args.config:
        given = [o for o, v in (("--unix-dir", args.unix_dir), ("--mps-dir", args.mps_dir)) if v]
        if given:
            return f"{' and '.join(given)} only with --config"
    return None


def _usage_error(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        hook = hook_library_path()
    except NativeBuildMissing as exc:
        return _usage_error(f"the Gemini hook is missing: {exc}")
    if (why := _unused_options(args)) is not None:
        return _usage_error(why)
    try:
        if args.secret_file:
            load_secret(args.secret_file)  # the hook would only wait forever on a bad file
        ports, gpus, unix = args.port, args.gpus, args.unix
        mps: dict[str, str] = {}
        if args.config:
            ports, gpus, specs = _from_config(args.config, args.name, args.backend_port)
            mps = _mps_env(args, specs)
            if args.unix_dir:
                unix = [socket_path(os.path.abspath(args.unix_dir), args.name, g) for g in gpus]
        spec = plan_command(args.name, ports, command, str(hook), ip=args.ip,
                            ld_preload=os.environ.get("LD_PRELOAD"), unix=unix,
                            secret_file=_absolute(args.secret_file), gpus=gpus)
    except (ValueError, ConfigError) as exc:
        return _usage_error(str(exc))
    try:
        # A session of its own: --timeout and Ctrl-C then reach everything the command started.
        proc = subprocess.Popen(spec.argv, env={**os.environ, **spec.env, **mps},
                                start_new_session=True)
    except OSError as exc:
        print(f"{PROG}: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        return EXIT_NOT_FOUND
    previous = _forward_signals(proc)
    try:
        code = exit_code(_wait(proc, args.timeout))
        # What it left running (a data loader's workers) is in its session, where no terminal's
        # Ctrl-C reaches: it ends with the command.
        _signal_group(proc, signal.SIGTERM)
        return code
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)  # type: ignore[arg-type]


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> int:
    # Always with a timeout: Popen then polls with short sleeps, which a signal interrupts, where
    # a blocking waitpid() entered just after a signal arrived would sit on it until the child
    # exits by itself.
    try:
        if timeout is not None:
            return proc.wait(timeout)
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return proc.wait(_POLL_S)
    except subprocess.TimeoutExpired:
        print(f"{PROG}: timeout after {timeout:g} s; stopping the command", file=sys.stderr)
        stop_group(proc)
        return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
