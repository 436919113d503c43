"""launch-backend: one scheduler per GPU and one pod manager per client and GPU of the config
(spec §1.4; several GPUs: issue 16).

Fixed against the original: SIGINT or SIGTERM stops exactly the processes it started (SIGTERM,
then SIGKILL after a grace period) and exits 0; a pod manager that dies is reported and the rest
keep running, while a scheduler that dies stops everything (exit 1).  Clients added to the config
while it runs get a pod manager too, and a GPU new to the config its scheduler (disable with
--no-follow).

When the config has spatial partitions (issue 13), from the start or from a live edit on, it also
runs an MPS control daemon with private directories (gemini.daemon.mps), looks at it every
--mps-check seconds, and quits it at the end; when MPS cannot start it says why and the
partitions' clients run time-sliced.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import logging
import os
import signal
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import IO

from gemini.cli._args import (
    add_turns_flags,
    add_verbosity,
    expand_verbosity,
    finite,
    min_quota_ms,
    port,
    positive,
    shared_turns_of,
    turns_error,
)
from gemini.core.config import ConfigError, ResourceConfig, gpu_problems
from gemini.core.launch import (
    BackendArgs,
    ProcessSpec,
    label,
    placement_name,
    placement_text,
    plan_added,
    plan_backend,
)
from gemini.core.mps import CONTROL, MpsPaths, default_dir
from gemini.daemon.files import replace_text
from gemini.daemon.gpus import present_gpus
from gemini.daemon.lifecycle import STOP_WITH_ENV
from gemini.daemon.logsetup import setup_logging
from gemini.daemon.mps import MpsKeeper
from gemini.daemon.watcher import ConfigWatcher, read_config
from gemini.secret import load_secret

log = logging.getLogger("gemini.launch")
GRACE_S = 5.0
MPS_CHECK_S = 5.0
# A pod manager that exits is started again, on its port (its client's hooks know that one),
# after 0.5 s, then 1, 2, ... up to 30 s while it keeps dying within 30 s of its start.
RESTART_FIRST_S = 0.5
RESTART_MAX_S = 30.0
RESTART_RESET_S = 30.0
EXAMPLE = "example: tools/launch-backend.py gem-schd gem-pmgr --config resource-config.txt"


def build_parser() -> argparse.ArgumentParser:
    d = BackendArgs("", "")
    p = argparse.ArgumentParser(
        prog="launch-backend",
        description="Start a Gemini scheduler per GPU and one pod manager per client and GPU "
        "of the config; Ctrl-C stops them all.",
        epilog=EXAMPLE,
    )
    p.add_argument("schd", metavar="SCHD", help="scheduler command, e.g. gem-schd")
    p.add_argument("pmgr", metavar="PMGR", help="pod manager command, e.g. gem-pmgr")
    p.add_argument("--ip", default=d.ip, help=f"address of everything (default {d.ip})")
    p.add_argument("--port", type=port, default=d.port,
                   help="the first GPU's scheduler port; pod managers get port+1, +2, ... in "
                   "config order, other GPUs' schedulers the ports after them "
                   f"(default {d.port})")
    p.add_argument("--config", default=d.config, help=f"text or YAML config ({d.config})")
    p.add_argument("--base_quota", type=finite, default=d.base_quota, help="ms (300)")
    p.add_argument("--min_quota", type=min_quota_ms, default=d.min_quota,
                   help="ms (20; at least 1)")
    p.add_argument("--window", type=finite, default=d.window, help="ms (10000)")
    p.add_argument("--no-follow", dest="follow", action="store_false",
                   help="do not start pod managers for clients added to the config later")
    p.add_argument("--secret-file", metavar="PATH",
                   help="shared secret for both daemons: clients must prove it (README)")
    p.add_argument("--unix", metavar="DIR",
                   help="pod managers on Unix sockets DIR/CLIENT.sock (CLIENT@gpuN.sock beyond "
                   "GPU 0), peer uid checked, instead of TCP ports")
    p.add_argument("--allow-uid", type=int, action="append", default=[], metavar="UID",
                   help="another uid whose programs may use the --unix sockets (repeatable)")
    p.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                   help="Prometheus /metrics of the first GPU's scheduler; the next GPU's on "
                   "PORT+1, …")
    p.add_argument("--no-clock", dest="clock", action="store_false",
                   help="the schedulers do not read the GPU's clock: caps are charged in time, "
                   "not by work (gem-schd --no-clock)")
    p.add_argument("--short-window", type=finite, default=None, metavar="MS",
                   help="the schedulers' short window (gem-schd --short-window; 0: off)")
    p.add_argument("--shared-speed", action=argparse.BooleanOptionalAction, default=True,
                   help="uncapped clients beside others share by work (gem-schd "
                   "--[no-]shared-speed; default: on)")
    p.add_argument("--hand-over-at-arrival", action=argparse.BooleanOptionalAction,
                   default=True,
                   help="hand the GPU on when the holder's token ends at its hook, not at its "
                   "grant's end (gem-schd --[no-]hand-over-at-arrival; default: on)")
    add_turns_flags(p)
    mps = p.add_argument_group("spatial partitions (README: Spatial sharing)")
    mps.add_argument("--mps-dir", metavar="DIR",
                     help="the MPS control daemon's pipe and log directories and the state file "
                     "(default: TMPDIR/gemini-mps-UID-PORT; launch-command --mps-dir)")
    mps.add_argument("--no-mps", action="store_true",
                     help="do not start MPS: the config's partitions are time-sliced")
    mps.add_argument("--mps-check", type=positive, default=MPS_CHECK_S, metavar="SECONDS",
                     help=f"how often to check that MPS still serves ({MPS_CHECK_S:g})")
    add_verbosity(p)
    return p


def say(line: str) -> None:
    """Print one line in one write(): the daemons share our stdout, and under PYTHONUNBUFFERED
    print() writes a line and its newline apart, so a daemon's line could land between them."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Supervisor:
    """Owns the child processes: starts them, notices deaths, stops them all at the end."""

    def __init__(self, args: BackendArgs, config: ResourceConfig) -> None:
        self.args = args
        self.config = config
        self.schedulers: dict[str, tuple[int, asyncio.subprocess.Process]] = {}  # by GPU
        self.managers: dict[tuple[str, str], tuple[int, asyncio.subprocess.Process]] = {}
        self.exits: asyncio.Queue[tuple[str, asyncio.subprocess.Process]] = asyncio.Queue()
        self.metrics_ports: set[int] = set()  # the schedulers' (a new one must take another)
        # Schedulers an edit started: one that dies is logged, and the rest keep running (an
        # edit gets an error, never a stop; the next edit may start it again).
        self.added: set[str] = set()
        self.down: dict[str, ProcessSpec] = {}  # such a scheduler, dead: by GPU
        self._specs: dict[str, ProcessSpec] = {}  # every spawned daemon's, by name
        self.stopping = False
        self._tasks: set[asyncio.Task[None]] = set()
        # Each pod manager's start (loop time) and the exits in a row soon after one.
        self._started_at: dict[str, float] = {}
        self._quick_exits: dict[str, int] = {}
        # Called when an edit brings the config its first partition (to start MPS).
        self.on_partitions: Callable[[], None] | None = None

    def keep(self, task: asyncio.Task[None]) -> None:
        # The loop holds tasks weakly; keep a reference until each finishes.
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def spawn(self, spec: ProcessSpec) -> None:
        # Own session and group: a terminal's Ctrl-C reaches only us, so we decide the stop
        # order, and a child exiting from that signal is never mistaken for a crash.
        # (STOP_WITH_ENV: our daemons stop when we exit, even killed with SIGKILL)
        env = {**os.environ, **spec.env, STOP_WITH_ENV: str(os.getpid())}
        proc = await asyncio.create_subprocess_exec(*spec.argv, env=env, start_new_session=True)
        self._specs[spec.name] = spec
        self._started_at[spec.name] = asyncio.get_running_loop().time()
        if spec.scheduler:
            self.schedulers[spec.gpu] = (spec.port, proc)
            if "--metrics-port" in spec.argv:
                self.metrics_ports.add(int(spec.argv[spec.argv.index("--metrics-port") + 1]))
        else:
            self.managers[(spec.env["POD_NAME"], spec.gpu)] = (spec.port, proc)
        program = os.path.basename(spec.argv[0])
        say(f"{spec.name}: {program} on {spec.listen} (pid {proc.pid})")
        self.keep(asyncio.ensure_future(self._reap(spec.name, proc)))

    @property
    def placement_file(self) -> Path:
        return Path(tempfile.gettempdir()) / placement_name(os.getuid(), self.args.port)

    def _say_placement(self) -> None:
        """Where the pod managers listen, for launch-command --config (an edit moves none, so
        the config's order may no longer say it); replaced at once, readers never see half."""
        managers = {key: port for key, (port, _) in self.managers.items()}
        try:
            replace_text(self.placement_file, placement_text(managers))
        except OSError as exc:
            log.warning("cannot write %s (%s): launch-command --config places its clients "
                        "as the config's order does", self.placement_file, exc)

    async def _reap(self, name: str, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        self.exits.put_nowait((name, proc))

    async def start(self, plan: list[ProcessSpec]) -> None:
        for spec in plan:  # schedulers first
            await self.spawn(spec)
        self._say_placement()

    async def supervise(self, stop: asyncio.Event) -> int:
        """0 when `stop` is set, 1 when a scheduler dies; a pod manager that dies is started
        again (_pod_manager_exited)."""
        stopped = asyncio.ensure_future(stop.wait())
        try:
            while True:
                exited = asyncio.ensure_future(self.exits.get())
                await asyncio.wait({stopped, exited}, return_when=asyncio.FIRST_COMPLETED)
                if stopped.done():
                    exited.cancel()
                    return 0
                name, proc = exited.result()
                gpu = next((g for g, (_, p) in self.schedulers.items() if p is proc), None)
                if gpu is not None and name in self.added:
                    del self.schedulers[gpu]
                    self.down[gpu] = self._specs[name]  # (the next edit starts it again)
                    log.error("the %s, started by an edit, exited with %s; GPU %s's clients "
                              "get no tokens until an edit starts it again, the others keep "
                              "running", name, proc.returncode, gpu)
                    continue
                if gpu is not None:
                    log.error("the %s exited with %s; stopping everything", name, proc.returncode)
                    return 1
                self._pod_manager_exited(name, proc)
        finally:
            stopped.cancel()

    def _pod_manager_exited(self, name: str, proc: asyncio.subprocess.Process) -> None:
        """Started again, on its port, after a pause that grows while it keeps dying soon
        after its start: else its client was left with none for good (an edit that removed
        and added the client back thought it running), and launch-command waited on its port
        for ever.  Not one whose client has left the config: a later edit that brings the
        client back starts a new one."""
        spec = self._specs[name]
        if not self._still_configured(spec):
            log.error("pod manager of %s exited with %s; its client is no longer in the config: "
                      "not started again", name, proc.returncode)
            return
        now = asyncio.get_running_loop().time()
        quick = self._quick_exits.get(name, 0) if now - self._started_at[name] < \
            RESTART_RESET_S else 0
        delay = min(RESTART_FIRST_S * 2 ** quick, RESTART_MAX_S)
        self._quick_exits[name] = quick + 1
        log.error("pod manager of %s exited with %s; starting it again in %g s (the others "
                  "keep running)", name, proc.returncode, delay)
        self.keep(asyncio.ensure_future(self._start_again(spec, delay)))

    def _still_configured(self, spec: ProcessSpec) -> bool:
        """Is a pod manager's client still in the config?  If not, it is forgotten (a later
        edit that brings the client back starts a new one)."""
        key = (spec.env["POD_NAME"], spec.gpu)
        if key in {(c.name, c.gpu) for c in self.config.clients}:
            return True
        self.managers.pop(key, None)
        self._say_placement()
        return False

    async def _start_again(self, spec: ProcessSpec, delay: float) -> None:
        await asyncio.sleep(delay)
        if self.stopping:
            return
        if not self._still_configured(spec):  # (removed during the pause)
            log.info("%s left the config: its pod manager is not started again", spec.name)
            return
        try:
            await self.spawn(spec)
        except OSError as exc:
            log.error("cannot start %s again: %s", spec.name, exc)

    def on_config(self, new: ResourceConfig) -> None:
        present = self.args.present_gpus  # (nvidia-smi's at start; None: it did not answer)
        if present is not None and (problems := gpu_problems(new, list(present))):
            # (a typo's GPU got a scheduler and a pod manager, and the program failed at
            # cuInit; one GPU named two ways got two schedulers, and its caps no longer held)
            log.error("%s: not applied here (no daemon started or stopped): %s", self.args.config,
                      "; ".join(problems))
            return
        before = {(c.name, c.gpu) for c in self.config.clients}
        after = {(c.name, c.gpu) for c in new.clients}
        self._partition_edits(self.config, new)
        self.config = new
        for name, gpu in sorted(before - after):
            moved = [g for n, g in after - before if n == name]
            if moved:
                log.info("%s moved from GPU %s to GPU %s: applies to its next process (the "
                         "running ones keep GPU %s's pod manager, which gets no more tokens)",
                         name, gpu, ", ".join(moved), gpu)
            else:
                log.info("%s removed from the config: its pod manager keeps running",
                         label(name, gpu))
        running = {key: port for key, (port, _) in self.managers.items()}
        # A scheduler an edit started, and that died, comes back as it was (its GPU's pod
        # managers know its port), if the config still has its GPU.
        again = [self.down.pop(gpu) for gpu in new.gpus if gpu in self.down]
        schedulers = {gpu: port for gpu, (port, _) in self.schedulers.items()}
        schedulers |= {spec.gpu: spec.port for spec in again}
        plan = again + plan_added(new, self.args, running, schedulers, self.metrics_ports)
        self.added |= {spec.name for spec in plan if spec.scheduler}
        self.keep(asyncio.ensure_future(self._add(plan)))

    def _partition_edits(self, old: ResourceConfig, new: ResourceConfig) -> None:
        """A changed partition: tokens follow at once (gem-schd), the MPS share of the SMs only
        with the client's next process (MPS reads it when a process starts)."""
        if new.spatial and not old.spatial and self.on_partitions is not None:
            log.info("the config now has partitions: starting MPS for them")
            self.on_partitions()
        before = {(c.name, c.gpu): c.partition for c in old.clients}
        for c in new.clients:
            key = (c.name, c.gpu)
            if key not in before or before[key] == c.partition:
                continue
            now = "no partition" if c.partition is None else (
                f"partition {c.partition.name} ({c.partition.sm}% of the SMs)")
            log.info("%s: now %s: its tokens follow at once; the SM share applies to its next "
                     "process (running ones keep the one they started with)",
                     label(c.name, c.gpu), now)

    async def _add(self, plan: list[ProcessSpec]) -> None:
        for spec in plan:
            if self.stopping:
                return
            try:
                await self.spawn(spec)
            except OSError as exc:
                log.error("cannot start %s: %s", spec.name, exc)
        self._say_placement()  # (once for the edit's pod managers, as at start)

    async def shutdown(self) -> None:
        """SIGTERM to every child still running, SIGKILL to those left after GRACE_S."""
        self.stopping = True
        with contextlib.suppress(OSError):
            self.placement_file.unlink()
        procs = [p for _, p in [*self.schedulers.values(), *self.managers.values()]]
        alive = [p for p in procs if p.returncode is None]
        for proc in alive:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
        waits = [asyncio.ensure_future(p.wait()) for p in alive]
        if not waits:
            return
        _, pending = await asyncio.wait(waits, timeout=GRACE_S)
        for proc in alive:
            if proc.returncode is None:
                log.warning("pid %d ignored SIGTERM for %.0f s; killing it", proc.pid, GRACE_S)
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
        if pending:
            await asyncio.wait(pending)


def gpu_problem() -> str | None:
    """Why MPS has no GPU to serve here, or None (nvidia-smi lists one)."""
    gpus = present_gpus()
    if gpus is None:
        return "no GPU: nvidia-smi is missing or did not answer"
    return None if gpus else "no GPU: nvidia-smi lists none"


async def start_mps(keeper: MpsKeeper, enabled: bool) -> None:
    """Start MPS (or record --no-mps) and say plainly in which mode partitions run."""
    if not enabled:
        keeper.disabled("launch-backend --no-mps")
    elif await keeper.start():
        paths = keeper.paths
        say(f"mps: {CONTROL} serving partitions (pipe {paths.pipe_dir}, log {paths.log_dir})")
        return
    say(f"mps: not running ({keeper.state.reason}): clients of partitions run time-sliced "
        "(gemini status shows each client's mode)")


async def watch_mps(keeper: MpsKeeper, stop: asyncio.Event, interval: float) -> None:
    """Every `interval` seconds: is MPS still serving?  (keeper.check restarts it if not.)"""
    while not stop.is_set():
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
        if stop.is_set():
            return
        try:
            lines = await keeper.check()
        except Exception:  # (a state file that cannot be written): said, and watched on
            log.exception("the MPS check failed; checking again in %g s", interval)
            continue
        for line in lines:
            log.warning("%s", line)


class MpsService:
    """MPS from the first config with a partition (at start or after a live edit) to the end."""

    def __init__(self, keeper: MpsKeeper, enabled: bool, check_s: float,
                 stop: asyncio.Event) -> None:
        self.keeper, self.enabled, self.check_s, self.stop = keeper, enabled, check_s, stop
        self.starting: asyncio.Future[None] | None = None
        self.watch: asyncio.Future[None] | None = None

    async def ensure(self) -> None:
        if self.starting is None:
            self.starting = asyncio.ensure_future(self._start())
        # Shielded: whoever awaits is cancelled at exit, while a control daemon half started
        # must finish starting so that close() can quit it.
        await asyncio.shield(self.starting)

    async def _start(self) -> None:
        await start_mps(self.keeper, self.enabled)
        if not self.stop.is_set():
            self.watch = asyncio.ensure_future(watch_mps(self.keeper, self.stop, self.check_s))

    async def close(self) -> None:
        if self.starting is None:
            return
        # A start still under way (an edit's, as the backend stops) ends first: quit before it
        # had made the daemon, and the daemon it then made would outlive us.
        with contextlib.suppress(Exception):
            await self.starting
        if self.watch is not None:
            self.watch.cancel()
        await self.keeper.stop()  # after the clients' daemons, so nothing is left using it


async def run(args: BackendArgs, config: ResourceConfig, follow: bool,
              keeper: MpsKeeper | None = None, mps: bool = True,
              mps_check_s: float = MPS_CHECK_S) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # (SIGHUP: a closed terminal)
        loop.add_signal_handler(sig, stop.set)
    supervisor = Supervisor(args, config)
    watcher = None
    service = None if keeper is None else MpsService(keeper, mps, mps_check_s, stop)
    try:
        if service is not None:
            supervisor.on_partitions = lambda: supervisor.keep(
                asyncio.ensure_future(service.ensure()))
            if config.spatial:  # before the schedulers, which read the state file at start
                await service.ensure()
        try:
            await supervisor.start(plan_backend(config, args))
        except OSError as exc:
            log.error("cannot start %s: %s", exc.filename, exc.strerror or exc)
            return 2
        if follow:
            watcher = ConfigWatcher(Path(args.config), loop, supervisor.on_config, current=config)
            watcher.start()
        return await supervisor.supervise(stop)
    finally:
        if watcher is not None:
            watcher.stop()
        await supervisor.shutdown()
        if service is not None:
            await service.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def hold_port(port: int) -> IO[str] | None:
    """The lock that says this launch-backend runs on `port` (held until we exit: the file
    stays open), or None where another holds it.  A second one on the same port failed to bind
    only after it had taken the first one's placement file and quit its MPS on the way out."""
    path = Path(tempfile.gettempdir()) / f"gemini-backend-{os.getuid()}-{port}.lock"
    try:
        lock = open(path, "a+", encoding="utf-8")  # noqa: SIM115 (held open for our whole run)
    except OSError as exc:
        print(f"launch-backend: cannot open {path}: {exc.strerror or exc}", file=sys.stderr)
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        print(f"launch-backend: another launch-backend (pid {holder}) runs on --port {port}",
              file=sys.stderr)
        return None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    return lock


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    ns = parser.parse_args(expand_verbosity(sys.argv[1:] if argv is None else argv))
    if error := turns_error(ns.lone_turns, ns.shared_turns):
        parser.error(error)
    setup_logging("launch-backend", ns.verbose)
    # Absolute, so that a child started elsewhere (or later, from a reload) finds the same file.
    secret_file = os.path.abspath(ns.secret_file) if ns.secret_file else None
    args = BackendArgs(ns.schd, ns.pmgr, ip=ns.ip, port=ns.port, config=ns.config,
                       base_quota=ns.base_quota, min_quota=ns.min_quota, window=ns.window,
                       verbose=ns.verbose, secret_file=secret_file,
                       metrics_port=ns.metrics_port,
                       unix_dir=os.path.abspath(ns.unix) if ns.unix else None,
                       allow_uids=tuple(ns.allow_uid), clock=ns.clock,
                       short_window=ns.short_window, shared_speed=ns.shared_speed,
                       hand_over_at_arrival=ns.hand_over_at_arrival, lone_turns=ns.lone_turns,
                       shared_turns=shared_turns_of(ns.lone_turns, ns.shared_turns))
    lock = hold_port(ns.port)
    if lock is None:
        return 2
    try:
        if args.unix_dir:
            os.makedirs(args.unix_dir, mode=0o755, exist_ok=True)
        if secret_file:
            load_secret(secret_file)  # a bad file stops us here, not in every child
        config = read_config(Path(args.config))
        # MPS runs only once some client has a partition; the schedulers follow its state file
        # from the start (a missing file: no MPS), so that a later edit may bring partitions.
        root = os.path.abspath(ns.mps_dir or default_dir(tempfile.gettempdir(), os.getuid(),
                                                         ns.port))
        keeper = MpsKeeper(MpsPaths(root), gpu_problem)
        args = replace(args, mps_state=keeper.paths.state_file)
        plan_backend(config, args)  # check ports and commands before starting anything
        gpus = present_gpus() or None  # (none listed: nothing to check against)
        if gpus is not None and (problems := gpu_problems(config, gpus)):
            raise ValueError(f"{args.config}: " + "; ".join(problems))
        args = replace(args, present_gpus=None if gpus is None else tuple(gpus))
    except (ConfigError, ValueError) as exc:  # SecretError is a ValueError
        print(f"launch-backend: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(run(args, config, ns.follow, keeper, not ns.no_mps, ns.mps_check))


if __name__ == "__main__":
    sys.exit(main())
