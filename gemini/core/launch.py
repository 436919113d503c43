"""What the launchers start: argv and environment for each process, decided without spawning.

`tools/launch-backend.py` starts one scheduler and one pod manager per client (spec §1.4);
`tools/launch-command.py` starts one program under the hook (spec §1.5).  The shells in
`gemini.cli.launch_*` turn these plans into processes.  Pure: no os, no subprocess.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from gemini.core.config import ResourceConfig

SCHEDULER = "scheduler"
MAX_PORT = 65535
MAX_UNIX_PATH = 107  # sun_path holds 108 bytes with the NUL


@dataclass(frozen=True)
class ProcessSpec:
    """One process to start.  `env` holds only what the launcher sets (the shell adds the rest);
    `listen` is the `ip:port` it serves on, for the launcher's one line per process."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    listen: str = ""


@dataclass(frozen=True)
class BackendArgs:
    """launch-backend's options; the defaults are the original script's (not gem-schd's)."""

    schd: str
    pmgr: str
    ip: str = "127.0.0.1"
    port: int = 50051
    config: str = "resource-config.txt"
    base_quota: float = 300.0
    min_quota: float = 20.0
    window: float = 10000.0
    verbose: int = 0
    secret_file: str | None = None  # passed to every daemon: clients must prove it


def _command(text: str, what: str) -> list[str]:
    # The commands may carry their own arguments ("python -m gemini.cli.schd").
    argv = shlex.split(text)
    if not argv:
        raise ValueError(f"the {what} command is empty")
    return argv


def _port(port: int) -> str:
    if not 0 < port <= MAX_PORT:
        raise ValueError(f"port {port} is outside 1..{MAX_PORT}")
    return str(port)


def _number(value: float) -> str:
    # "300", not "300.0" (what a person would type), and no rounding as with "%g".
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def plan_scheduler(args: BackendArgs) -> ProcessSpec:
    path = PurePath(args.config)
    # A bare file name has parent "."; the child runs in our directory, as the original's cwd.
    argv = [
        *_command(args.schd, "scheduler"),
        "-p", str(path.parent), "-f", path.name, "-P", _port(args.port),
        "-q", _number(args.base_quota), "-m", _number(args.min_quota), "-w", _number(args.window),
        "--ip", args.ip,
    ]
    if args.secret_file:
        argv += ["--secret-file", args.secret_file]
    if args.verbose:
        argv += ["-v", str(args.verbose)]
    return ProcessSpec(SCHEDULER, tuple(argv), {}, f"{args.ip}:{args.port}")


def plan_pod_manager(name: str, port: int, args: BackendArgs) -> ProcessSpec:
    env = {
        "SCHEDULER_IP": args.ip,
        "SCHEDULER_PORT": _port(args.port),
        "POD_MANAGER_IP": args.ip,
        "POD_MANAGER_PORT": _port(port),
        "POD_NAME": name,
    }
    if args.secret_file:
        env["GEMINI_SECRET_FILE"] = args.secret_file
    argv = _command(args.pmgr, "pod manager")
    return ProcessSpec(name, tuple(argv), env, f"{args.ip}:{port}")


def plan_backend(config: ResourceConfig, args: BackendArgs) -> list[ProcessSpec]:
    """The scheduler first, then one pod manager per client on port + 1, + 2, … in config order."""
    managers = [
        plan_pod_manager(name, args.port + idx, args)
        for idx, name in enumerate(config.names, start=1)
    ]
    return [plan_scheduler(args), *managers]


def plan_added(
    config: ResourceConfig, args: BackendArgs, running: Mapping[str, int]
) -> list[ProcessSpec]:
    """Pod managers for clients of a reloaded config that have none (`running`: name -> port).

    A new client gets port + its position, as it would at launch, unless a running pod manager
    already holds that port; then the next port above every one in use, so none ever moves.
    """
    used = {args.port, *running.values()}
    out = []
    for idx, name in enumerate(config.names, start=1):
        if name in running:
            continue
        port = args.port + idx
        if port in used:
            port = max(used) + 1
        used.add(port)
        out.append(plan_pod_manager(name, port, args))
    return out


def plan_command(
    name: str,
    port: int | None,
    command: Sequence[str],
    hook_path: str,
    *,
    ip: str = "127.0.0.1",
    ld_preload: str | None = None,
    unix: str | None = None,
    secret_file: str | None = None,
) -> ProcessSpec:
    """A program under the hook; `ld_preload` is the caller's LD_PRELOAD, kept after the hook.
    `unix`: the pod manager's Unix socket, used instead of ip:port."""
    if not command:
        raise ValueError("no command to run")
    if unix is None and port is None:
        raise ValueError("need the pod manager's port or Unix socket")
    if unix is not None and not 0 < len(unix.encode()) <= MAX_UNIX_PATH:
        raise ValueError(f"Unix socket path {unix!r} is empty or longer than {MAX_UNIX_PATH} bytes")
    # The hook goes first so its cu* symbols win over any other preloaded library's.
    preload = hook_path if not ld_preload else f"{hook_path}:{ld_preload}"
    where = f"unix:{unix}" if unix is not None else _port(port or 0)
    env = {
        "POD_MANAGER_IP": ip,
        "POD_MANAGER_PORT": where,
        "POD_NAME": name,
        "LD_PRELOAD": preload,
    }
    if secret_file:
        env["GEMINI_SECRET_FILE"] = secret_file
    return ProcessSpec(name, tuple(command), env, where if unix is not None else f"{ip}:{port}")
