"""What the launchers start: argv and environment for each process, decided without spawning.

`tools/launch-backend.py` starts one scheduler per GPU and one pod manager per client and GPU
(spec §1.4);
`tools/launch-command.py` starts one program under the hook (spec §1.5).  The shells in
`gemini.cli.launch_*` turn these plans into processes.  Pure: no os, no subprocess.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath

from gemini.core.config import DEFAULT_GPU, ResourceConfig, format_present_gpus

SCHEDULER = "scheduler"
MAX_PORT = 65535
MAX_UNIX_PATH = 107  # sun_path holds 108 bytes with the NUL


@dataclass(frozen=True)
class ProcessSpec:
    """One process to start.  `env` holds only what the launcher sets (the shell adds the rest);
    `listen` is the `ip:port` it serves on, for the launcher's one line per process; `gpu` the
    GPU it serves and `port` its port (the key of a pod manager is (client, gpu))."""

    name: str
    argv: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    listen: str = ""
    gpu: str = DEFAULT_GPU
    port: int = 0
    scheduler: bool = False


def label(name: str, gpu: str) -> str:
    """How a (client, GPU) pair is named in the launcher's lines: the name alone on GPU 0."""
    if gpu == DEFAULT_GPU:
        return name
    return f"{name}@gpu{gpu}" if gpu.isdigit() else f"{name}@{gpu}"


def socket_path(unix_dir: str, name: str, gpu: str = DEFAULT_GPU) -> str:
    """Where launch-backend --unix DIR puts the pod manager of (client, gpu)."""
    path = str(PurePath(unix_dir) / f"{label(name, gpu)}.sock")
    if len(path.encode()) > MAX_UNIX_PATH:
        raise ValueError(f"Unix socket path {path!r} is longer than {MAX_UNIX_PATH} bytes: "
                         "use a shorter directory")
    return path


@dataclass(frozen=True)
class Ports:
    """Where a config's daemons listen: one scheduler per GPU, one pod manager per (client, GPU).

    As Gemini's launcher: the first GPU's scheduler on the base port, the pod managers on base + 1,
    + 2, … in config order (so a one-GPU config gets exactly the original ports); the other GPUs'
    schedulers after the last pod manager."""

    schedulers: dict[str, int]
    managers: dict[tuple[str, str], int]

    def of_client(self, name: str) -> list[tuple[str, int]]:
        """(gpu, pod manager port) of each GPU of a client, in config order."""
        return [(gpu, port) for (n, gpu), port in self.managers.items() if n == name]


def place(config: ResourceConfig, base: int) -> Ports:
    managers = {(c.name, c.gpu): base + i for i, c in enumerate(config.clients, start=1)}
    gpus = config.gpus
    schedulers = {gpus[0]: base}
    for k, gpu in enumerate(gpus[1:], start=1):
        schedulers[gpu] = base + len(managers) + k
    return Ports(schedulers, managers)


def placement_name(uid: int, port: int) -> str:
    """The file (in the temporary directory) where launch-backend, its first scheduler on
    `port`, says on which port each of its pod managers listens: after a live edit they are not
    where the config's order places them (a running one never moves), and launch-command
    --config reads them there."""
    return f"gemini-placement-{uid}-{port}.json"


def placement_text(managers: Mapping[tuple[str, str], int]) -> str:
    rows = [{"name": name, "gpu": gpu, "port": port} for (name, gpu), port in managers.items()]
    return json.dumps({"pod_managers": rows}, indent=1) + "\n"


def parse_placement(text: str) -> dict[tuple[str, str], int]:
    """ValueError for anything that is not a placement file."""
    try:
        rows = json.loads(text)["pod_managers"]
        return {(str(r["name"]), str(r["gpu"])): int(r["port"]) for r in rows}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"not a placement file: {exc}") from None


def placed(config: ResourceConfig, base: int, name: str,
           running: Mapping[tuple[str, str], int]) -> list[tuple[str, int]]:
    """(gpu, pod manager port) of each of a client's GPUs, in config order: where a running
    launch-backend put it (`running`, its placement file), else where `place` would."""
    return [(gpu, running.get((name, gpu), port))
            for gpu, port in place(config, base).of_client(name)]


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
    metrics_port: int | None = None  # the first GPU's scheduler's; the next GPU's + 1, …
    unix_dir: str | None = None  # pod managers on Unix sockets there (socket_path), not TCP
    allow_uids: tuple[int, ...] = ()  # other uids that may use those sockets
    mps_state: str | None = None  # the MPS state file the schedulers follow (partitions)
    clock: bool = True  # False: gem-schd --no-clock (caps charged in time, not by work)
    short_window: float | None = None  # ms, gem-schd --short-window (None: its default)
    shared_speed: bool = True  # False: gem-schd --no-shared-speed (uncapped shares by time)
    hand_over_at_arrival: bool = True  # False: gem-schd --no-hand-over-at-arrival
    lone_turns: bool = True  # False: gem-schd --no-lone-turns
    shared_turns: bool = True  # False: gem-schd --no-shared-turns (where lone turns are on)
    metrics_ip: str | None = None  # the metrics pages' address (None: `ip`'s)
    # nvidia-smi's (index, UUID) list as launch-backend found it: its schedulers check each
    # edit's GPUs against it, as it does (gem-schd --present-gpus), so that an edit it refuses
    # is refused by all of them.  None: nothing to check (nvidia-smi did not answer; the
    # Kubernetes agent, whose file keeps a vanished GPU's pods).
    present_gpus: tuple[tuple[int, str], ...] | None = None


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


def plan_scheduler(
    args: BackendArgs, gpu: str = DEFAULT_GPU, port: int | None = None, index: int = 0
) -> ProcessSpec:
    """`index`: the GPU's place among the config's GPUs (its metrics port's offset)."""
    port = args.port if port is None else port
    path = PurePath(args.config)
    # A bare file name has parent "."; the child runs in our directory, as the original's cwd.
    argv = [
        *_command(args.schd, "scheduler"),
        "-p", str(path.parent), "-f", path.name, "-P", _port(port),
        "-q", _number(args.base_quota), "-m", _number(args.min_quota), "-w", _number(args.window),
        "--ip", args.ip,
    ]
    if gpu != DEFAULT_GPU:
        argv += ["--gpu", gpu]
    if args.metrics_port is not None:
        argv += ["--metrics-port", _port(args.metrics_port + index)]
        if args.metrics_ip is not None:
            argv += ["--metrics-ip", args.metrics_ip]
    if args.secret_file:
        argv += ["--secret-file", args.secret_file]
    if args.mps_state:
        argv += ["--mps-state", args.mps_state]
    if not args.clock:
        argv += ["--no-clock"]
    if args.short_window is not None:
        argv += ["--short-window", _number(args.short_window)]
    if not args.shared_speed:
        argv += ["--no-shared-speed"]
    if not args.hand_over_at_arrival:
        argv += ["--no-hand-over-at-arrival"]
    if not args.lone_turns:
        argv += ["--no-lone-turns"]
    if args.lone_turns and not args.shared_turns:
        argv += ["--no-shared-turns"]
    if args.present_gpus is not None:
        argv += ["--present-gpus", format_present_gpus(list(args.present_gpus))]
    if args.verbose:
        argv += ["-v", str(args.verbose)]
    return ProcessSpec(label(SCHEDULER, gpu), tuple(argv), {}, f"{args.ip}:{port}", gpu, port,
                       scheduler=True)


def plan_pod_manager(
    name: str, port: int, args: BackendArgs, gpu: str = DEFAULT_GPU,
    scheduler_port: int | None = None,
) -> ProcessSpec:
    env = {
        "SCHEDULER_IP": args.ip,
        "SCHEDULER_PORT": _port(args.port if scheduler_port is None else scheduler_port),
        "POD_MANAGER_IP": args.ip,
        "POD_MANAGER_PORT": _port(port),
        "POD_NAME": name,
    }
    if args.secret_file:
        env["GEMINI_SECRET_FILE"] = args.secret_file
    argv = _command(args.pmgr, "pod manager")
    listen = f"{args.ip}:{port}"
    if args.unix_dir is not None:
        env["POD_MANAGER_SOCKET"] = socket_path(args.unix_dir, name, gpu)
        listen = f"unix:{env['POD_MANAGER_SOCKET']}"
        for uid in args.allow_uids:
            argv += ["--allow-uid", str(uid)]
    return ProcessSpec(label(name, gpu), tuple(argv), env, listen, gpu, port)


def plan_backend(config: ResourceConfig, args: BackendArgs) -> list[ProcessSpec]:
    """The schedulers (one per GPU in use), then one pod manager per client and GPU (`place`)."""
    ports = place(config, args.port)
    schedulers = [
        plan_scheduler(args, gpu, port, index)
        for index, (gpu, port) in enumerate(ports.schedulers.items())
    ]
    managers = [
        plan_pod_manager(name, port, args, gpu, ports.schedulers[gpu])
        for (name, gpu), port in ports.managers.items()
    ]
    if args.metrics_port is not None:  # (else the scheduler failed to bind it, and all stopped)
        listen = {spec.port: spec.name for spec in [*schedulers, *managers]
                  if not spec.listen.startswith("unix:")}
        for index in range(len(schedulers)):
            if (taken := listen.get(args.metrics_port + index)) is not None:
                raise ValueError(f"--metrics-port {args.metrics_port}: port "
                                 f"{args.metrics_port + index} is the {taken}'s; take one "
                                 f"outside {min(listen)}..{max(listen)}")
    return [*schedulers, *managers]


def plan_added(
    config: ResourceConfig,
    args: BackendArgs,
    running: Mapping[tuple[str, str], int],
    schedulers: Mapping[str, int] | None = None,
    metrics_ports: Collection[int] = (),
) -> list[ProcessSpec]:
    """Daemons for a reloaded config that has some without one: a scheduler for each new GPU,
    a pod manager for each new (client, GPU) pair (`running`: (name, gpu) -> port;
    `schedulers`: gpu -> port, default GPU 0's on the base port; `metrics_ports`: those the
    running schedulers serve their metrics on).

    Each gets the port it would get at launch (`place`) unless a running daemon already holds
    it; then the next port above every one in use, so none ever moves.  A new scheduler's
    metrics port likewise (its GPU's place in the new config may be a running one's).
    """
    schedulers = dict(schedulers) if schedulers is not None else {DEFAULT_GPU: args.port}
    want = place(config, args.port)
    used = {*schedulers.values(), *running.values()}
    metrics_used = set(metrics_ports)

    def free(port: int) -> int:  # (nor a metrics port: the daemon could not bind it)
        if port in used or port in metrics_used:
            port = max(used) + 1
            while port in metrics_used:
                port += 1
        used.add(port)
        return port

    def metrics_index(index: int) -> int:
        while args.metrics_port is not None and args.metrics_port + index in metrics_used | used:
            index += 1
        if args.metrics_port is not None:
            metrics_used.add(args.metrics_port + index)
        return index

    out = []
    for index, (gpu, port) in enumerate(want.schedulers.items()):
        if gpu not in schedulers:
            schedulers[gpu] = free(port)
            out.append(plan_scheduler(args, gpu, schedulers[gpu], metrics_index(index)))
    for (name, gpu), port in want.managers.items():
        if (name, gpu) not in running:
            out.append(plan_pod_manager(name, free(port), args, gpu, schedulers[gpu]))
    return out


def plan_command(
    name: str,
    port: int | Sequence[int] | None,
    command: Sequence[str],
    hook_path: str,
    *,
    ip: str = "127.0.0.1",
    ld_preload: str | None = None,
    unix: str | Sequence[str] | None = None,
    secret_file: str | None = None,
    gpus: Sequence[str] = (),
) -> ProcessSpec:
    """A program under the hook; `ld_preload` is the caller's LD_PRELOAD, kept after the hook.
    `port`: the pod manager's port, or one per GPU in `gpus`' order; `unix`: the pod manager's
    Unix socket (or one per GPU), used instead.  `gpus` (indices or UUIDs): the client's GPUs,
    made the only ones the program sees (CUDA_VISIBLE_DEVICES), so that its device i is
    gpus[i], managed by the i-th pod manager."""
    if not command:
        raise ValueError("no command to run")
    sockets = [unix] if isinstance(unix, str) else list(unix or [])
    for path in sockets:
        if not 0 < len(path.encode()) <= MAX_UNIX_PATH:
            raise ValueError(
                f"Unix socket path {path!r} is empty or longer than {MAX_UNIX_PATH} bytes")
    ports = [port] if isinstance(port, int) else list(port or [])
    if not sockets and not ports:
        raise ValueError("need the pod manager's port or Unix socket")
    managers = len(sockets) or len(ports)
    if gpus and len(gpus) != managers:
        raise ValueError(f"{len(gpus)} GPUs ({','.join(gpus)}) but {managers} pod manager(s): "
                         "give one port per GPU, in the same order")
    # The hook goes first so its cu* symbols win over any other preloaded library's.
    preload = hook_path if not ld_preload else f"{hook_path}:{ld_preload}"
    if sockets:
        where = ",".join(f"unix:{path}" for path in sockets)
    else:
        where = ",".join(_port(p) for p in ports)
    env = {
        "POD_MANAGER_IP": ip,
        "POD_MANAGER_PORT": where,
        "POD_NAME": name,
        "LD_PRELOAD": preload,
    }
    if gpus:
        env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    if secret_file:
        env["GEMINI_SECRET_FILE"] = secret_file
    listen = where if sockets else ",".join(f"{ip}:{p}" for p in ports)
    return ProcessSpec(name, tuple(command), env, listen)
