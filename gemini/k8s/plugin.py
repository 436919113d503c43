"""The kubelet's device plugin for one resource (share units or memory units), over gRPC.

The servicer only speaks the protocol: the device list it streams (ListAndWatch) is set by the
agent, unit choice is `units.preferred`, and Allocate / PreStartContainer are the agent's
(`Handler`).  A refusal is a gRPC error whose message the kubelet puts in the pod's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Protocol

import grpc

from gemini.k8s.api import deviceplugin_pb2 as dp
from gemini.k8s.api import deviceplugin_pb2_grpc as dp_grpc
from gemini.k8s.units import HEALTHY, UNHEALTHY, Kind, preferred

log = logging.getLogger("gemini.k8s")
MAX_MESSAGE = 64 << 20  # a node's memory units in one GetPreferredAllocation
KUBELET_MAX_MESSAGE = 4 << 20  # what the kubelet reads of one ListAndWatch message


class Handler(Protocol):
    def hint(self, kind: Kind) -> str | None:
        """The GPU this kind's next units should come from, if the agent knows one."""

    async def allocate(self, kind: Kind, ids: Sequence[str]) -> dp.ContainerAllocateResponse:
        """What the container gets for these units; ValueError refuses them."""

    async def prestart(self, kind: Kind, ids: Sequence[str]) -> None:
        """Make the container's client ready before it starts; ValueError refuses."""


class UnitPlugin(dp_grpc.DevicePluginServicer):
    def __init__(self, kind: Kind, handler: Handler) -> None:
        self.kind = kind
        self.handler = handler
        self.devices: tuple[dp.Device, ...] = ()
        self._changed = asyncio.Event()

    @property
    def options(self) -> dp.DevicePluginOptions:
        # PreStartContainer on the share units: the client is made when the container starts,
        # when the kubelet can name its pod (see agent.py).
        return dp.DevicePluginOptions(pre_start_required=self.kind is Kind.SHARE,
                                      get_preferred_allocation_available=True)

    def set_devices(self, devices: Sequence[tuple[str, bool]]) -> bool:
        """(ID, healthy) of every unit; wakes the ListAndWatch streams when anything changed."""
        new = tuple(dp.Device(ID=i, health=HEALTHY if ok else UNHEALTHY) for i, ok in devices)
        if new == self.devices:
            return False
        self.devices = new
        size = dp.ListAndWatchResponse(devices=new).ByteSize()
        if size > KUBELET_MAX_MESSAGE:
            log.error("%s: %d units make a %d-byte device list, more than the kubelet reads "
                      "(4 MiB): raise --memory-unit-mib", self.kind.resource, len(new), size)
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        return True

    async def GetDevicePluginOptions(self, request: dp.Empty, context: object
                                     ) -> dp.DevicePluginOptions:
        return self.options

    async def ListAndWatch(self, request: dp.Empty, context: object
                           ) -> AsyncIterator[dp.ListAndWatchResponse]:
        while True:
            changed = self._changed  # taken before sending: a change meanwhile is not missed
            yield dp.ListAndWatchResponse(devices=self.devices)
            await changed.wait()

    async def GetPreferredAllocation(
        self, request: dp.PreferredAllocationRequest, context: object
    ) -> dp.PreferredAllocationResponse:
        hint = self.handler.hint(self.kind)
        out = []
        for c in request.container_requests:
            ids = preferred(list(c.available_deviceIDs), list(c.must_include_deviceIDs),
                            c.allocation_size, hint)
            out.append(dp.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return dp.PreferredAllocationResponse(container_responses=out)

    async def Allocate(self, request: dp.AllocateRequest, context: grpc.aio.ServicerContext
                       ) -> dp.AllocateResponse:
        out = []
        for c in request.container_requests:
            try:
                out.append(await self.handler.allocate(self.kind, list(c.devices_ids)))
            except ValueError as exc:
                log.warning("refused %s %s: %s", self.kind.resource, list(c.devices_ids), exc)
                await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return dp.AllocateResponse(container_responses=out)

    async def PreStartContainer(self, request: dp.PreStartContainerRequest,
                                context: grpc.aio.ServicerContext
                                ) -> dp.PreStartContainerResponse:
        try:
            await self.handler.prestart(self.kind, list(request.devices_ids))
        except ValueError as exc:
            log.warning("cannot start the container of %s: %s", self.kind.resource, exc)
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, str(exc))
        return dp.PreStartContainerResponse()


class PluginServer:
    """A UnitPlugin served on a Unix socket in the kubelet's device-plugin directory."""

    def __init__(self, plugin: UnitPlugin, socket: Path) -> None:
        self.plugin = plugin
        self.socket = socket
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        await self.stop()
        with contextlib.suppress(FileNotFoundError):
            self.socket.unlink()
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_MESSAGE),
                                          ("grpc.max_send_message_length", MAX_MESSAGE)])
        dp_grpc.add_DevicePluginServicer_to_server(self.plugin, server)
        server.add_insecure_port(f"unix://{self.socket}")
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            await server.stop(grace=None)  # ListAndWatch streams never end by themselves
