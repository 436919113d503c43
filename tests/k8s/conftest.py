"""Fixtures for the Kubernetes agent: a fake kubelet and API server, the agent on a thread of its
own (its asyncio loop), in a short temporary directory (Unix socket paths are limited to 107
bytes)."""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gemini.core.launch import BackendArgs
from gemini.k8s.agent import Agent, Settings
from gemini.k8s.units import Gpu
from tests.k8s.fake_apiserver import FakeApiServer
from tests.k8s.fake_kubelet import FakeKubelet
from tests.procs import free_ports

PY = sys.executable
TIMEOUT_S = 30.0


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="gk", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(short_tmp: Path) -> Iterator[FakeKubelet]:
    k = FakeKubelet(short_tmp / "plugins", short_tmp / "podres.sock")
    k.start()
    yield k
    k.close()


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    a = FakeApiServer()
    yield a
    a.close()


class AgentThread:
    """An Agent serving on its own event loop; `call` runs a coroutine of it there."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.loop: asyncio.AbstractEventLoop | None = None
        self.stop: asyncio.Event | None = None
        self.error: BaseException | None = None
        self._up = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            self.stop = asyncio.Event()
            self._up.set()
            await self.agent.serve(self.stop)

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by close()
            self.error = exc
            self._up.set()

    def start(self) -> AgentThread:
        self.thread.start()
        assert self._up.wait(TIMEOUT_S)
        return self

    def call(self, coro: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro(), self.loop).result(TIMEOUT_S)

    def close(self) -> None:
        if self.loop is not None and self.stop is not None and self.thread.is_alive():
            self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(TIMEOUT_S)
        assert not self.thread.is_alive(), "the agent did not stop"
        if self.error is not None:
            raise self.error


@dataclass
class Node:
    """The GPUs the agent's scan finds (edit `gpus` to make one disappear)."""

    gpus: list[Gpu]

    def scan(self) -> list[Gpu]:
        return list(self.gpus)


@pytest.fixture
def start_agent(short_tmp: Path, kubelet: FakeKubelet, api: FakeApiServer
                ) -> Iterator[Callable[..., AgentThread]]:
    started: list[AgentThread] = []

    def start(node: Node, **overrides: Any) -> AgentThread:
        hook = short_tmp / "fake-hook.so"
        hook.write_bytes(b"not a library")
        dev = short_tmp / "dev"
        dev.mkdir(exist_ok=True)
        backend = BackendArgs(f"{PY} -m gemini.cli.schd", f"{PY} -m gemini.cli.pmgr",
                              port=free_ports(len(node.gpus)), base_quota=100, min_quota=50,
                              window=2000)
        settings = Settings(state_dir=short_tmp / "state", plugin_dir=kubelet.plugin_dir,
                            pod_resources=kubelet.pod_resources, dev_dir=dev,
                            sync_interval_s=3600.0, watch_interval_s=0.05, hook=hook,
                            backend=backend, daemon_log=short_tmp / "daemons.log",
                            **overrides)

        def get_pod(namespace: str, name: str) -> dict[str, Any]:
            from gemini.k8s.apiserver import ApiServer

            return ApiServer(api.url).get_pod(namespace, name)

        thread = AgentThread(Agent(settings, node.scan, get_pod)).start()
        started.append(thread)
        return thread

    yield start
    for t in started:
        t.close()
