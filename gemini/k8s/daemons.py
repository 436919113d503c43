"""The node agent's children: one gem-schd per GPU and one gem-pmgr per admitted container,
planned by gemini.core.launch as launch-backend plans them (same argv and environment), with the
pod managers on Unix sockets in their clients' directories.

Each child's stderr goes through us, line by line, to ours (the pod's log), or to a file, so
that we can wait for its "listening" line instead of guessing when it is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TextIO

from gemini.core.launch import BackendArgs, ProcessSpec, plan_pod_manager, plan_scheduler

log = logging.getLogger("gemini.k8s")
READY_TIMEOUT_S = 20.0
STOP_GRACE_S = 5.0
_LISTENING = re.compile(r"listening on ")


class DaemonError(ValueError):
    """A daemon that did not come up; the message names it."""


@dataclass
class Child:
    name: str
    proc: asyncio.subprocess.Process
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    pump: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None


async def _pump(child: Child, out: TextIO | None) -> None:
    """Copy the child's stderr to `out` (None: ours, as it is when each line comes); set
    `ready` at its "listening" line."""
    assert child.proc.stderr is not None
    async for raw in child.proc.stderr:
        line = raw.decode(errors="replace")
        (out or sys.stderr).write(line)
        if not child.ready.is_set() and _LISTENING.search(line):
            child.ready.set()
    (out or sys.stderr).flush()


class Daemons:
    def __init__(self, args: BackendArgs, log_file: Path | None = None) -> None:
        """`log_file`: where the children's lines go, appended (None: our stderr).  An agent
        that runs inside another program (the tests) keeps them out of its terminal."""
        self.args = args
        self.schedulers: dict[str, Child] = {}  # by GPU
        self.managers: dict[str, Child] = {}  # by client name
        self._log_file = log_file
        self._log: TextIO | None = None

    def scheduler_port(self, gpu: str) -> int:
        """GPU i's scheduler listens on base + i: stable whatever GPUs come and go."""
        return self.args.port + int(gpu)

    async def _spawn(self, spec: ProcessSpec) -> Child:
        try:
            proc = await asyncio.create_subprocess_exec(
                *spec.argv, env={**os.environ, **spec.env}, stderr=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise DaemonError(f"cannot start {spec.name} ({spec.argv[0]}): {exc}") from None
        child = Child(spec.name, proc)
        if self._log_file is not None and self._log is None:  # (open while children run)
            self._log = open(self._log_file, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        child.pump = asyncio.ensure_future(_pump(child, self._log))
        return child

    async def _until_ready(self, child: Child) -> None:
        ready = asyncio.ensure_future(child.ready.wait())
        exited = asyncio.ensure_future(child.proc.wait())
        try:
            await asyncio.wait({ready, exited}, timeout=READY_TIMEOUT_S,
                               return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            exited.cancel()
        if not child.ready.is_set():
            await self._stop(child)
            code = child.proc.returncode
            raise DaemonError(f"{child.name} did not come up (exit status {code})")

    async def ensure_scheduler(self, gpu: str) -> bool:
        """Start GPU `gpu`'s scheduler unless it runs; True when it was started."""
        child = self.schedulers.get(gpu)
        if child is not None and child.alive:
            return False
        if child is not None:
            log.error("the scheduler of GPU %s exited with %s; starting it again", gpu,
                      child.proc.returncode)
        spec = plan_scheduler(self.args, gpu, self.scheduler_port(gpu), int(gpu))
        child = await self._spawn(spec)
        self.schedulers[gpu] = child
        await self._until_ready(child)
        return True

    def manager_alive(self, name: str) -> bool:
        child = self.managers.get(name)
        return child is not None and child.alive

    async def start_manager(self, name: str, gpu: str, unix_dir: str,
                            allow_uids: tuple[int, ...]) -> None:
        await self.stop_manager(name)
        args = replace(self.args, unix_dir=unix_dir, allow_uids=allow_uids)
        port = self.scheduler_port(gpu)
        # (plan_pod_manager wants a TCP port too; with unix_dir the pod manager never uses it)
        spec = plan_pod_manager(name, port, args, gpu, port)
        child = await self._spawn(spec)
        self.managers[name] = child
        await self._until_ready(child)
        if allow_uids:
            # Mode 0660 would keep those uids out before the pod manager could check them
            # (SO_PEERCRED); the directory is mounted into the client's container only.
            os.chmod(spec.env["POD_MANAGER_SOCKET"], 0o666)

    async def stop_manager(self, name: str) -> None:
        child = self.managers.pop(name, None)
        if child is not None:
            await self._stop(child)

    async def _stop(self, child: Child) -> None:
        if child.alive:
            with contextlib.suppress(ProcessLookupError):
                child.proc.terminate()
            try:
                await asyncio.wait_for(child.proc.wait(), STOP_GRACE_S)
            except asyncio.TimeoutError:
                log.warning("%s ignored SIGTERM for %.0f s; killing it", child.name, STOP_GRACE_S)
                with contextlib.suppress(ProcessLookupError):
                    child.proc.kill()
                await child.proc.wait()
        if child.pump is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await child.pump

    async def stop_all(self) -> None:
        children = [*self.managers.values(), *self.schedulers.values()]
        self.managers.clear()
        self.schedulers.clear()
        await asyncio.gather(*(self._stop(c) for c in children))
        if self._log is not None:
            self._log.close()
            self._log = None
