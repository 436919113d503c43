"""The MPS control daemon of one launch-backend, and the state file it keeps (issue 13).

`MpsControl` runs `nvidia-cuda-mps-control` with private pipe and log directories: starts it
(`-d`), asks it things (a command on its stdin), tells it to quit.  `MpsKeeper` is what
launch-backend does with it: start it when the config has partitions, write the state file that
gem-schd and launch-command read, look at it every few seconds (a control daemon that stopped
answering, or a server that died, is restarted; a server recovering from a client's fatal error
is reported), and stop it at the end.  When MPS cannot start (no program, not permitted, no GPU)
the state file says why, and the partitions' clients run time-sliced.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

from gemini.core.mps import (
    CONTROL,
    HIDDEN_FROM_CONTROL,
    LOG_ENV,
    PIPE_ENV,
    MpsPaths,
    MpsState,
    is_fault,
    server_pids,
)
from gemini.daemon.files import replace_text

log = logging.getLogger("gemini.mps")
COMMAND_TIMEOUT_S = 10.0
ANSWER_WAIT_S = 5.0  # how long a freshly started control daemon may take to answer
QUIT_WAIT_S = 10.0


def read_state(path: str | Path) -> MpsState:
    """The state file; a missing or broken one means MPS is not up (and says why)."""
    try:
        return MpsState.from_json(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return MpsState(False, f"launch-backend is not running MPS (no {path})")
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return MpsState(False, f"unreadable MPS state {path}: {exc}")


def write_state(path: str | Path, state: MpsState) -> None:
    """Replace the state file at once (readers never see half of it)."""
    replace_text(path, state.to_json())


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # somebody else's process: it exists
    return True


class MpsControl:
    """One control daemon, reached through its private pipe directory."""

    def __init__(self, paths: MpsPaths, program: str = CONTROL) -> None:
        self.paths = paths
        self.program = program

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in HIDDEN_FROM_CONTROL}
        return {**env, PIPE_ENV: self.paths.pipe_dir, LOG_ENV: self.paths.log_dir}

    async def _run(self, argv: list[str], stdin: str = "") -> tuple[int, str]:
        """(exit status, output) of one run of the control program; 127 when it is missing."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=self.env())
        except OSError as exc:
            return 127, exc.strerror or str(exc)
        try:
            out, _ = await asyncio.wait_for(proc.communicate(stdin.encode()), COMMAND_TIMEOUT_S)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
            return 124, f"no answer within {COMMAND_TIMEOUT_S:g} s"
        return int(proc.returncode or 0), out.decode(errors="replace").strip()

    async def ask(self, command: str) -> tuple[int, str]:
        """Send one command to the running control daemon, as `echo CMD | program` does."""
        return await self._run([self.program], command + "\n")

    async def start(self) -> str | None:
        """Start the control daemon and wait until it answers: None when it does, else why not."""
        if shutil.which(self.program) is None:
            return f"{self.program} is not on PATH"
        for directory in (self.paths.pipe_dir, self.paths.log_dir):
            os.makedirs(directory, mode=0o700, exist_ok=True)
        code, out = await self._run([self.program, "-d"])
        if code != 0:
            return f"{self.program} -d failed (exit {code}): {out or self._log_tail()}"
        deadline = asyncio.get_running_loop().time() + ANSWER_WAIT_S
        while True:
            code, out = await self.ask("get_server_list")
            if code == 0:
                return None
            if asyncio.get_running_loop().time() >= deadline:
                return (f"{self.program} started but does not answer ({out}); "
                        f"log: {self._log_tail() or 'empty'}")
            await asyncio.sleep(0.1)

    async def look(self) -> tuple[str | None, set[int], set[int]]:
        """(why the control daemon does not answer, or None; the servers it lists that are gone;
        those recovering from a fatal fault)."""
        code, out = await self.ask("get_server_list")
        if code != 0:
            return f"the MPS control daemon does not answer ({out or f'exit {code}'})", set(), set()
        dead, faulted = set(), set()
        for pid in server_pids(out):
            if not _pid_alive(pid):
                dead.add(pid)
                continue
            code, status = await self.ask(f"get_server_status {pid}")
            if code == 0 and is_fault(status):
                faulted.add(pid)
        return None, dead, faulted

    async def stop(self) -> None:
        """`quit`, then wait for the daemon (its pid file names it) to go; kill it if it
        will not.  Safe to call when it is not running."""
        pid = self._control_pid()  # before `quit`, which may remove the file
        code, _ = await self.ask("quit")
        if code != 0 and pid is None:
            return  # nothing was running
        loop = asyncio.get_running_loop()
        deadline = loop.time() + QUIT_WAIT_S
        while pid is not None and _pid_alive(pid) and loop.time() < deadline:
            await asyncio.sleep(0.1)
        if pid is not None and _pid_alive(pid):
            log.warning("the MPS control daemon (pid %d) did not quit in %.0f s; killing it",
                        pid, QUIT_WAIT_S)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def _control_pid(self) -> int | None:
        try:
            text = Path(self.paths.pid_file).read_text().strip()
        except OSError:
            return None
        return int(text) if text.isdigit() else None

    def _log_tail(self) -> str:
        try:
            lines = (Path(self.paths.log_dir) / "control.log").read_text().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-3:])


class MpsKeeper:
    """launch-backend's MPS: started once, watched, restarted when it dies, stopped at exit;
    the state file always says whether partitions run side by side."""

    def __init__(self, paths: MpsPaths, gpu_problem: Callable[[], str | None],
                 program: str = CONTROL) -> None:
        self.paths = paths
        self.control = MpsControl(paths, program)
        self.gpu_problem = gpu_problem  # why there is no GPU for MPS, or None
        self.state = MpsState(False, "not started yet")
        self.tried = False  # whether we ever ran the control program (then quit it at the end)
        self._faulted: set[int] = set()
        self._dead: set[int] = set()  # servers listed but gone at the last look
        self._unanswered = False  # the last look got no answer from the control daemon

    def _set(self, state: MpsState) -> None:
        self.state = state
        write_state(self.paths.state_file, state)

    def _up(self, fault: str = "") -> MpsState:
        return MpsState(True, "", self.paths.pipe_dir, self.paths.log_dir, fault)

    def disabled(self, why: str) -> None:
        """Partitions without MPS from the start (launch-backend --no-mps)."""
        os.makedirs(self.paths.root, mode=0o700, exist_ok=True)
        self._set(MpsState(False, why))

    async def start(self) -> bool:
        """Start MPS; False (and the state file says why) when it cannot run."""
        os.makedirs(self.paths.root, mode=0o700, exist_ok=True)
        why = self.gpu_problem()
        if why is None:
            self.tried = True
            why = await self.control.start()
        if why is not None:
            self._set(MpsState(False, f"MPS could not start: {why}"))
            return False
        self._set(self._up())
        return True

    async def check(self) -> list[str]:
        """Look once; returns what to log (one line per event).  A dead control daemon or server
        is restarted (MPS then serves new processes; those it served have lost their GPU work);
        while MPS is down, each check tries to start it again."""
        if not self.state.spatial:
            if not self.state.reason.startswith("MPS stopped"):
                return []  # never started (or --no-mps): nothing to look after
            if await self._restart():
                return ["MPS is back: new processes of partitions run side by side again"]
            return []
        problem, dead, faulted = await self.control.look()
        if problem is not None and not self._unanswered:
            # Unanswered twice in a row is dead: one slow answer on a loaded host is not, and a
            # restart ends the GPU work of every client of a partition.
            self._unanswered = True
            return [f"{problem}; asking again at the next check before restarting MPS"]
        self._unanswered = False
        # A server that just exited may still be listed once: gone at two looks in a row is dead.
        gone, self._dead = dead & self._dead, dead
        if problem is None and gone:
            problem = f"MPS server {', '.join(map(str, sorted(gone)))} is gone"
        if problem is not None:
            lines = [f"{problem}; restarting MPS"]
            if not await self._restart():
                lines.append(f"{self.state.reason}: clients of partitions started from now on "
                             "run time-sliced (trying again at each check)")
            return lines
        return self._faults(faulted)

    async def _restart(self) -> bool:
        await self.control.stop()
        why = self.gpu_problem() or await self.control.start()
        if why is not None:
            self._set(MpsState(False, f"MPS stopped and could not be restarted: {why}"))
            return False
        self._faulted, self._dead = set(), set()
        self._set(self._up())
        return True

    def _faults(self, faulted: set[int]) -> list[str]:
        lines = [f"MPS server {pid} hit a fatal GPU error in one of its clients: all its "
                 "clients get errors, and new ones wait until every one of them has exited "
                 "(README: Spatial sharing, faults)" for pid in sorted(faulted - self._faulted)]
        lines += [f"MPS server {pid} has recovered" for pid in sorted(self._faulted - faulted)]
        if faulted != self._faulted:
            self._faulted = faulted
            fault = "" if not faulted else (
                f"MPS server {', '.join(map(str, sorted(faulted)))} is recovering from a fatal "
                "GPU error: CUDA may fail to start until its clients have exited")
            self._set(self._up(fault))
        return lines

    async def stop(self) -> None:
        """Quit the control daemon (if we ever started one) and remove the state file."""
        if self.tried:
            await self.control.stop()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.paths.state_file)
