"""gem-k8s-agent: the node agent, one per GPU node (a DaemonSet pod).

It is the kubelet's device plugin for two resources, `gemini.io/gpu-share` (100 units per GPU)
and `gemini.io/gpu-memory` (one unit per --memory-unit-mib MiB of each GPU), and it runs gemini
on the node the way launch-backend does: one gem-schd per GPU (`--gpu G`, all reading one
config file with `gpu=` fields) and one gem-pmgr per admitted container, on a Unix socket.

How an allocation becomes a client.  The kubelet's Allocate gives device IDs only, not the pod,
so the agent works in two steps:

1. **Allocate** (share units): checks that the units are on one GPU, names a client for them
   (`k8s-g<GPU>-<random>`), makes its directory (later its pod manager's socket, and a copy of
   the secret) and answers with what the container needs: the hook mounted read-only and
   preloaded, GEMINI_CLIENT and POD_NAME, POD_MANAGER_PORT=unix:<socket>, GEMINI_SECRET_FILE,
   the GPU (NVIDIA_VISIBLE_DEVICES and its device nodes).
2. **PreStartContainer** (the share plugin asks for it), called just before the container starts,
   when the kubelet has recorded the allocation: the agent asks the kubelet's **PodResources
   API** which container holds exactly these share units and which memory units it got, reads
   that pod from the **API server** (its gemini.io annotations and runAsUser; RBAC: get pods),
   writes the client into the config, waits until the GPU's scheduler has it and starts the
   client's pod manager.  The container starts only then.  A refusal (memory on another GPU than
   the share, no memory asked, a bad limit) is an error the kubelet shows in the pod's events.

Chosen over matching Allocate to pending pods through the API server (as GaiaGPU does): two pods
with equal requests cannot be told apart there, while the kubelet's own record is exact.

Every --sync-interval the agent rescans the GPUs (one that disappears is reported unhealthy),
and lists the kubelet's pod resources: an allocation missing from two lists in a row belongs to
a pod that is gone, and its client is removed (pod manager stopped, config line and directory
removed), so nothing survives a pod.  Every --watch-interval it checks the kubelet's socket: a
new one (kubelet restart) gets both plugins served again and registered.

State lives in --state-dir (a hostPath, the same path inside and outside the agent's pod: the
kubelet mounts from it): resource-config.txt, lib/ (the hook and ld.so.preload), secret, and
clients/<name>/ (allocation.json, the pod manager's socket, the secret copy).  A restarted agent
reads clients/ back and starts their pod managers again.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc

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
from gemini.client import query_status
from gemini.core.config import ConfigError
from gemini.core.launch import BackendArgs, socket_path
from gemini.daemon.logsetup import setup_logging
from gemini.k8s import inventory, kubelet
from gemini.k8s.api import deviceplugin_pb2 as dp
from gemini.k8s.apiserver import ApiServer
from gemini.k8s.clients import (
    Allocation,
    Client,
    checked_config,
    client_for,
    find_container,
    gone,
    overlapping,
)
from gemini.k8s.daemons import DaemonError, Daemons
from gemini.k8s.plugin import PluginServer, UnitPlugin
from gemini.k8s.podspec import HOOK_IN_CONTAINER
from gemini.k8s.units import SHARE_RESOURCE, Gpu, Kind, UnitError, one_gpu, units
from gemini.secret import create_secret_file, load_secret

log = logging.getLogger("gemini.k8s")
ENDPOINTS = {Kind.SHARE: "gemini-gpu-share.sock", Kind.MEMORY: "gemini-gpu-memory.sock"}
HOOK_NAME = "libgemhook.so.1"
CONTAINER_DIR = "/var/run/gemini"
DEVICE_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
SCHEDULER_TIMEOUT_S = 10.0
HINT_FOR_S = 5.0  # how long a container's first resource steers its second (Agent.hint)

DEFAULT_BACKEND = BackendArgs("gem-schd", "gem-pmgr")

PodGetter = Callable[[str, str], dict[str, Any]]


@dataclass(frozen=True)
class Settings:
    state_dir: Path = Path("/var/lib/gemini")
    plugin_dir: Path = kubelet.DEVICE_PLUGIN_DIR
    pod_resources: Path = kubelet.POD_RESOURCES_SOCKET
    dev_dir: Path = Path("/dev")  # where the agent sees the host's device nodes
    memory_unit_mib: int = 1
    secret: bool = True
    sync_interval_s: float = 5.0
    watch_interval_s: float = 1.0
    hook: Path | None = None  # the hook to install (default: the package's build)
    backend: BackendArgs = DEFAULT_BACKEND
    daemon_log: Path | None = None  # where its daemons' lines go (None: its stderr, the pod's log)

    @property
    def config(self) -> Path:
        return self.state_dir / "resource-config.txt"

    @property
    def lib_dir(self) -> Path:
        return self.state_dir / "lib"

    @property
    def clients_dir(self) -> Path:
        return self.state_dir / "clients"

    @property
    def secret_file(self) -> Path:
        return self.state_dir / "secret"


class Agent:
    """The device plugins' Handler and the owner of the node's gemini daemons."""

    def __init__(self, settings: Settings, scan: Callable[[], list[Gpu]], get_pod: PodGetter
                 ) -> None:
        self.s = settings
        self.scan = scan
        self.get_pod = get_pod
        secret = str(settings.secret_file) if settings.secret else None
        self.daemons = Daemons(replace(settings.backend, config=str(settings.config),
                                       secret_file=secret), settings.daemon_log)
        self.gpus: dict[str, Gpu] = {}  # every GPU seen, by index
        self.present: set[str] = set()
        self.allocations: dict[str, Allocation] = {}
        self.lock = asyncio.Lock()
        self.plugins = {kind: UnitPlugin(kind, self) for kind in Kind}
        self.servers = {kind: PluginServer(p, settings.plugin_dir / ENDPOINTS[kind])
                        for kind, p in self.plugins.items()}
        # GPU and when, per kind: where the other resource of a container went (allocate)
        self._hints: dict[Kind, tuple[str, float]] = {}
        self._now = time.monotonic  # (the hints' clock; a test's own)
        self._registered: tuple[int, int] | None = None
        self._listing_failed = False
        self._scanned = False
        self._published: object = None

    # ---- start and stop --------------------------------------------------------------------

    async def start(self) -> None:
        for d in (self.s.state_dir, self.s.lib_dir, self.s.clients_dir):
            d.mkdir(parents=True, exist_ok=True)
        self._install_hook()
        if self.s.secret and not self.s.secret_file.exists():
            create_secret_file(self.s.secret_file)
        if self.s.secret:
            load_secret(self.s.secret_file)  # a broken file stops us here
        self._recover()
        self._write_config()
        await self._rescan()
        for alloc in self.allocations.values():
            if alloc.client is not None:
                try:
                    await self._run_client(alloc, alloc.client)
                except ValueError as exc:
                    log.error("%s: cannot start its pod manager again: %s", alloc.name, exc)

    async def stop(self) -> None:
        for server in self.servers.values():
            await server.stop()
        await self.daemons.stop_all()

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until `stop` is set; whatever was started is stopped, also after a failed start."""
        tasks: list[asyncio.Future[None]] = []
        try:
            await self.start()
            tasks = [
                asyncio.ensure_future(self._every(self.s.watch_interval_s, self.check_kubelet)),
                asyncio.ensure_future(self._every(self.s.sync_interval_s, self.sync)),
            ]
            await stop.wait()
        finally:
            for t in tasks:
                t.cancel()
            for t in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await t
            await self.stop()

    async def _every(self, interval: float, step: Callable[[], Any]) -> None:
        while True:
            try:
                await step()
            except Exception:  # one failed round must not end the loop
                log.exception("agent step %s failed", step.__name__)
            await asyncio.sleep(interval)

    def _install_hook(self) -> None:
        from gemini.native import hook_library_path

        source = self.s.hook or hook_library_path()
        target = self.s.lib_dir / HOOK_NAME
        data = source.read_bytes()
        if not target.exists() or target.read_bytes() != data:
            _write_atomic(target, data, 0o644)
        _write_atomic(self.s.lib_dir / "ld.so.preload", f"{HOOK_IN_CONTAINER}\n".encode(), 0o644)

    def _recover(self) -> None:
        for d in sorted(self.s.clients_dir.iterdir()):
            if d.is_dir() and not (d / "allocation.json").exists():
                # an agent that died between making a client's directory and saving its record
                # (the secret's copy in it): no container was ever given it
                log.warning("%s has no allocation record; removing it", d)
                shutil.rmtree(d, ignore_errors=True)
        for record in sorted(self.s.clients_dir.glob("*/allocation.json")):
            try:
                alloc = Allocation.from_json(record.read_text())
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("%s is unreadable (%s); removing it", record, exc)
                shutil.rmtree(record.parent, ignore_errors=True)
                continue
            self.allocations[alloc.name] = alloc
            log.info("%s: recovered (%s)", alloc.name, alloc.client.owner if alloc.client
                     else "not started")

    # ---- the kubelet -----------------------------------------------------------------------

    async def check_kubelet(self) -> None:
        """(Re-)serve and register both plugins when the kubelet's socket is new."""
        sock = self.s.plugin_dir / kubelet.KUBELET_SOCKET
        try:
            st = sock.stat()
        except FileNotFoundError:
            if self._registered is not None:
                log.warning("the kubelet's socket %s is gone; waiting for it", sock)
            self._registered = None
            return
        ident = (st.st_ino, st.st_mtime_ns)
        ours = all(server.socket.exists() for server in self.servers.values())
        if ident == self._registered and ours:
            return
        for server in self.servers.values():
            await server.start()
        try:
            for kind, plugin in self.plugins.items():
                await kubelet.register(sock, ENDPOINTS[kind], kind.resource, plugin.options)
        except grpc.aio.AioRpcError as exc:
            log.error("registering with the kubelet at %s failed: %s", sock, exc.details())
            self._registered = None
            return
        self._registered = ident
        log.info("registered %s and %s with the kubelet (%d GPUs)", Kind.SHARE.resource,
                 Kind.MEMORY.resource, len(self.gpus))

    async def sync(self) -> None:
        """Rescan the GPUs; remove the clients of pods that are gone; restart dead daemons."""
        await self._rescan()
        try:
            listed = await kubelet.list_pod_resources(self.s.pod_resources)
        except grpc.aio.AioRpcError as exc:
            if not self._listing_failed:
                log.warning("cannot list pod resources at %s (%s): no client is removed until "
                            "it answers", self.s.pod_resources, exc.details())
            self._listing_failed = True
            return
        self._listing_failed = False
        async with self.lock:
            for alloc in gone(list(self.allocations.values()), listed):
                await self._remove(alloc, "its pod is gone")
        for alloc in list(self.allocations.values()):
            if alloc.client is not None and not self.daemons.manager_alive(alloc.name):
                log.error("%s (%s): its pod manager is not running; starting it", alloc.name,
                          alloc.client.owner)
                try:
                    await self._run_client(alloc, alloc.client)
                except ValueError as exc:
                    log.error("%s: %s", alloc.name, exc)

    async def _rescan(self) -> None:
        found = await asyncio.to_thread(self.scan)
        present = {g.index for g in found}
        for g in found:
            if g.index not in self.gpus:
                log.info("GPU %s (%s, %d MiB)", g.index, g.uuid, g.memory_mib)
            self.gpus[g.index] = g
        for index in sorted(self.present - present):
            log.error("GPU %s (%s) is gone: its units are unhealthy", index, self.gpus[index].uuid)
        if self._scanned:
            for index in sorted(present - self.present):
                log.info("GPU %s is present: its units are healthy", index)
        self._scanned = True
        self.present = present
        self._publish()
        for index in sorted(present, key=int):
            try:
                await self.daemons.ensure_scheduler(index)
            except DaemonError as exc:
                log.error("%s", exc)

    def _publish(self) -> None:
        # Only on a change: a node's memory units run to hundreds of thousands.
        state = (tuple(sorted(self.gpus.items())), frozenset(self.present))
        if state == self._published:
            return
        self._published = state
        for kind, plugin in self.plugins.items():
            devices = []
            for index in sorted(self.gpus, key=int):
                healthy = index in self.present
                unit = self.s.memory_unit_mib
                devices += [(u, healthy) for u in units(self.gpus[index], kind, unit)]
            plugin.set_devices(devices)

    # ---- the device plugins' Handler -------------------------------------------------------

    def hint(self, kind: Kind) -> str | None:
        """The GPU the container allocated just now has its other resource on, if any: the
        kubelet allocates a container's resources one right after the other, so an older hint
        is another container's, left by one whose second resource never came."""
        gpu, at = self._hints.get(kind, ("", -math.inf))
        return gpu if self._now() - at <= HINT_FOR_S else None

    async def allocate(self, kind: Kind, ids: Sequence[str]) -> dp.ContainerAllocateResponse:
        gpu = one_gpu(ids, kind)
        if gpu not in self.gpus:
            raise UnitError(f"GPU {gpu} of {kind.resource} units {list(ids)[:3]}... is not on "
                            "this node")
        # The container's other resource should come from the same GPU: say so to
        # GetPreferredAllocation (a preference only; PreStartContainer checks).  The second of
        # the pair clears it: left, it steered the next container's first resource to this
        # GPU, whatever that container needs.
        other = Kind.MEMORY if kind is Kind.SHARE else Kind.SHARE
        second = self.hint(kind) is not None
        self._hints.pop(kind, None)
        if second:
            self._hints.pop(other, None)
        else:
            self._hints[other] = (gpu, self._now())
        if kind is Kind.MEMORY:
            return dp.ContainerAllocateResponse()
        async with self.lock:
            for old in overlapping(list(self.allocations.values()), ids):
                await self._remove(old, "its units were given to a new container")
            alloc = Allocation(self._new_name(gpu), gpu, tuple(sorted(ids)))
            self._make_dir(alloc)
            self.allocations[alloc.name] = alloc
        log.info("%s: %d %s units of GPU %s allocated", alloc.name, len(ids), SHARE_RESOURCE, gpu)
        return self._container_response(alloc)

    async def prestart(self, kind: Kind, ids: Sequence[str]) -> None:
        if kind is not Kind.SHARE:
            return
        key = frozenset(ids)
        alloc = next((a for a in self.allocations.values() if a.key == key), None)
        if alloc is None:
            raise UnitError(f"these {SHARE_RESOURCE} units were not allocated by this agent (its "
                            "state directory was lost?): delete the pod to allocate again")
        try:
            listed = await kubelet.list_pod_resources(self.s.pod_resources)
        except grpc.aio.AioRpcError as exc:
            raise UnitError(f"cannot ask the kubelet which pod has {alloc.name}'s units "
                            f"({self.s.pod_resources}: {exc.details()})") from None
        container = find_container(listed, ids)
        if container is None:
            raise UnitError(f"the kubelet lists no container with {alloc.name}'s units")
        pod = await asyncio.to_thread(self.get_pod, container.namespace, container.pod)
        client = client_for(alloc, container, pod, self.s.memory_unit_mib)
        await self._run_client(alloc, client)

    # ---- clients ---------------------------------------------------------------------------

    def _new_name(self, gpu: str) -> str:
        while True:
            name = f"k8s-g{gpu}-{secrets.token_hex(4)}"
            if name not in self.allocations:
                return name

    def _dir(self, name: str) -> Path:
        return self.s.clients_dir / name

    def _make_dir(self, alloc: Allocation) -> None:
        d = self._dir(alloc.name)
        d.mkdir(mode=0o755, exist_ok=True)
        os.chmod(d, 0o755)
        if self.s.secret:
            # The container may run as any uid; the directory is mounted into it alone.
            _write_atomic(d / "secret", self.s.secret_file.read_bytes(), 0o644)
        self._save(alloc)

    def _save(self, alloc: Allocation) -> None:
        _write_atomic(self._dir(alloc.name) / "allocation.json", alloc.to_json().encode(), 0o644)

    def _container_response(self, alloc: Allocation) -> dp.ContainerAllocateResponse:
        gpu = self.gpus[alloc.gpu]
        envs = {
            # Both: the hook reads GEMINI_CLIENT first, as a container's own env (which wins
            # over ours) often sets POD_NAME to the pod's name (the downward API).
            "GEMINI_CLIENT": alloc.name,
            "POD_NAME": alloc.name,
            "POD_MANAGER_PORT": "unix:" + socket_path(CONTAINER_DIR, alloc.name, alloc.gpu),
            "NVIDIA_VISIBLE_DEVICES": gpu.uuid,
            "LD_PRELOAD": HOOK_IN_CONTAINER,
        }
        if self.s.secret:
            envs["GEMINI_SECRET_FILE"] = f"{CONTAINER_DIR}/secret"
        mounts = [
            dp.Mount(container_path=CONTAINER_DIR, host_path=str(self._dir(alloc.name)),
                     read_only=True),
            dp.Mount(container_path=HOOK_IN_CONTAINER, host_path=str(self.s.lib_dir / HOOK_NAME),
                     read_only=True),
        ]
        nodes = [*DEVICE_NODES, f"nvidia{gpu.device_minor}"]
        devices = [dp.DeviceSpec(container_path=f"/dev/{n}", host_path=f"/dev/{n}",
                                 permissions="rw")
                   for n in nodes if (self.s.dev_dir / n).exists()]
        return dp.ContainerAllocateResponse(envs=envs, mounts=mounts, devices=devices)

    async def _run_client(self, alloc: Allocation, client: Client) -> None:
        """Config line in, scheduler told, pod manager running (each only if not yet)."""
        async with self.lock:
            if alloc.name not in self.allocations:
                raise UnitError(f"{alloc.name} was removed meanwhile")
            if alloc.client is not None and alloc.client.owner != client.owner:
                await self.daemons.stop_manager(alloc.name)  # another pod: fresh state
            if alloc.client != client:
                log.info("%s is %s: share %.2f, cap %.2f, memory %d MiB, GPU %s", alloc.name,
                         client.owner, client.spec.request, client.spec.limit,
                         client.spec.gpu_mem >> 20, alloc.gpu)
            alloc.client = client
            self._save(alloc)
            self._write_config()
            await self.daemons.ensure_scheduler(alloc.gpu)
            await self._until_scheduled(client)
            if not self.daemons.manager_alive(alloc.name):
                await self.daemons.start_manager(alloc.name, alloc.gpu,
                                                 str(self._dir(alloc.name)), client.allow_uids)

    async def _until_scheduled(self, client: Client) -> None:
        """Until the GPU's scheduler has read the client's line (its pod manager asks for the
        memory limit once, at start)."""
        spec = client.spec
        port = self.daemons.scheduler_port(spec.gpu)
        key = load_secret(self.s.secret_file) if self.s.secret else None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SCHEDULER_TIMEOUT_S
        while True:
            try:
                snap = await asyncio.to_thread(query_status, "127.0.0.1", port, 2.0, key)
                for c in snap.get("clients", []):
                    if (c.get("name"), c.get("gpu_mem"), c.get("limit")) == (
                            spec.name, spec.gpu_mem, spec.limit):
                        return
            except (OSError, ValueError):
                pass
            if loop.time() > deadline:
                raise UnitError(f"the scheduler of GPU {spec.gpu} did not take {spec.name} "
                                f"within {SCHEDULER_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.02)

    async def _remove(self, alloc: Allocation, why: str) -> None:
        """Stop the pod manager, drop the config line and the directory (lock held)."""
        await self.daemons.stop_manager(alloc.name)
        self.allocations.pop(alloc.name, None)
        self._write_config()
        shutil.rmtree(self._dir(alloc.name), ignore_errors=True)
        owner = alloc.client.owner if alloc.client is not None else "never started"
        log.info("%s (%s) removed: %s", alloc.name, owner, why)

    def _write_config(self) -> None:
        clients = [a.client for a in self.allocations.values() if a.client is not None]
        try:
            text, _ = checked_config(clients)
        except ConfigError as exc:  # a bug, not a user error: the specs were built valid
            raise UnitError(f"cannot write the config: {exc}") from None
        path = self.s.config
        if not path.exists() or path.read_text() != text:
            _write_atomic(path, text.encode(), 0o644)


def _write_atomic(path: Path, data: bytes, mode: int) -> None:
    """Write to a temporary name beside `path`, then rename over it (readers never see half)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        os.fchmod(f.fileno(), mode)
        f.write(data)
    os.replace(tmp, path)


# ---- command line --------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    d = Settings()
    b = d.backend
    p = argparse.ArgumentParser(
        prog="gem-k8s-agent",
        description="gemini's Kubernetes node agent: device plugin for gemini.io/gpu-share and "
        "gemini.io/gpu-memory, one gem-schd per GPU, one gem-pmgr per admitted container.",
    )
    p.add_argument("--state-dir", type=Path, default=d.state_dir,
                   help=f"host directory for config, hook, sockets (same path on the host: "
                   f"the kubelet mounts from it) ({d.state_dir})")
    p.add_argument("--plugin-dir", type=Path, default=d.plugin_dir,
                   help=f"the kubelet's device-plugin directory ({d.plugin_dir})")
    p.add_argument("--pod-resources", type=Path, default=d.pod_resources,
                   help=f"the kubelet's PodResources socket ({d.pod_resources})")
    p.add_argument("--api-server", metavar="URL",
                   help="API server URL (default: the pod's service account, in-cluster)")
    p.add_argument("--gpus-file", type=Path,
                   help="read the GPUs from this JSON file instead of nvidia-smi (tests, the "
                   "fake driver): [{\"index\": 0, \"uuid\": \"GPU-…\", \"memory_mib\": 81559}]")
    p.add_argument("--dev-dir", type=Path, default=d.dev_dir,
                   help=f"where the host's device nodes are seen ({d.dev_dir})")
    p.add_argument("--memory-unit-mib", type=int, default=d.memory_unit_mib,
                   help="MiB per gemini.io/gpu-memory unit (1; raise it when a node's GPU memory "
                   "makes more units than the kubelet reads in one message, ~170 GiB)")
    p.add_argument("--no-secret", dest="secret", action="store_false",
                   help="run the daemons without a shared secret")
    p.add_argument("--sync-interval", type=positive, default=d.sync_interval_s,
                   help=f"seconds between GPU scans and pod checks ({d.sync_interval_s})")
    p.add_argument("--watch-interval", type=positive, default=d.watch_interval_s,
                   help=f"seconds between looks at the kubelet's socket ({d.watch_interval_s})")
    p.add_argument("--schd", default=b.schd, help=f"scheduler command ({b.schd})")
    p.add_argument("--pmgr", default=b.pmgr, help=f"pod manager command ({b.pmgr})")
    p.add_argument("--port", type=port, default=b.port,
                   help=f"GPU i's scheduler listens on 127.0.0.1:PORT+i ({b.port})")
    p.add_argument("--base_quota", type=finite, default=b.base_quota, help="ms (300)")
    p.add_argument("--min_quota", type=min_quota_ms, default=b.min_quota,
                   help="ms (20; at least 1)")
    p.add_argument("--window", type=finite, default=b.window, help="ms (10000)")
    p.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                   help="Prometheus /metrics of GPU i's scheduler on PORT+i")
    p.add_argument("--metrics-ip", default="0.0.0.0", metavar="IP",
                   help="their address (0.0.0.0: the pod's, for Prometheus to scrape; the "
                        "schedulers' token ports stay on 127.0.0.1)")
    p.add_argument("--hand-over-at-arrival", action=argparse.BooleanOptionalAction,
                   default=b.hand_over_at_arrival,
                   help="the schedulers hand the GPU on when the holder's token ends at its "
                   "hook, not at its grant's end (gem-schd --[no-]hand-over-at-arrival; "
                   "default: on)")
    p.add_argument("--shared-speed", action=argparse.BooleanOptionalAction,
                   default=b.shared_speed,
                   help="the schedulers share the GPU among uncapped pods by work (gem-schd "
                   "--[no-]shared-speed; default: on)")
    add_turns_flags(p, who="pod", lone_default=b.lone_turns)
    add_verbosity(p)
    return p


def settings_from(ns: argparse.Namespace) -> Settings:
    if ns.memory_unit_mib <= 0:
        raise ValueError("--memory-unit-mib must be at least 1")
    if error := turns_error(ns.lone_turns, ns.shared_turns):
        raise ValueError(error)
    backend = BackendArgs(ns.schd, ns.pmgr, "127.0.0.1", ns.port, base_quota=ns.base_quota,
                          min_quota=ns.min_quota, window=ns.window, verbose=ns.verbose,
                          metrics_port=ns.metrics_port, metrics_ip=ns.metrics_ip,
                          hand_over_at_arrival=ns.hand_over_at_arrival,
                          shared_speed=ns.shared_speed, lone_turns=ns.lone_turns,
                          shared_turns=shared_turns_of(ns.lone_turns, ns.shared_turns))
    return Settings(state_dir=ns.state_dir.absolute(), plugin_dir=ns.plugin_dir,
                    pod_resources=ns.pod_resources, dev_dir=ns.dev_dir,
                    memory_unit_mib=ns.memory_unit_mib, secret=ns.secret,
                    sync_interval_s=ns.sync_interval, watch_interval_s=ns.watch_interval,
                    backend=backend)


async def _main(agent: Agent) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await agent.serve(stop)
    return 0


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(expand_verbosity(sys.argv[1:] if argv is None else argv))
    setup_logging("gem-k8s-agent", ns.verbose)
    try:
        settings = settings_from(ns)
        api = ApiServer(ns.api_server) if ns.api_server else ApiServer.in_cluster()
    except ValueError as exc:
        print(f"gem-k8s-agent: {exc}", file=sys.stderr)
        return 2
    if ns.gpus_file is not None:
        gpus_file = ns.gpus_file

        def scan() -> list[Gpu]:
            return inventory.scan_file(gpus_file)
    else:
        scan = inventory.scan_nvidia_smi
    try:
        return asyncio.run(_main(Agent(settings, scan, api.get_pod)))
    except (OSError, ValueError) as exc:  # SecretError, DaemonError, a missing hook
        print(f"gem-k8s-agent: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
