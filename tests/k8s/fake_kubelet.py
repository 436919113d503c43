"""A kubelet for tests: the real gRPC services over Unix sockets, driven by the test.

* serves Registration on DIR/kubelet.sock: on Register it dials the plugin's endpoint in DIR and
  follows its ListAndWatch stream, as the kubelet does;
* admits pods as the kubelet's device manager does, one container and one resource at a time:
  GetPreferredAllocation (when the plugin offers it) over the healthy, free units, then Allocate,
  then, once every container is allocated, PreStartContainer where the plugin asked for it;
* serves PodResourcesLister.List on its own socket with what it allocated;
* `restart()` is a kubelet restart: a new Registration socket, every other file in DIR removed.

Everything waits on conditions with timeouts; nothing sleeps.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from gemini.k8s.api import deviceplugin_pb2 as dp
from gemini.k8s.api import deviceplugin_pb2_grpc as dp_grpc
from gemini.k8s.api import podresources_pb2 as pr
from gemini.k8s.api import podresources_pb2_grpc as pr_grpc

TIMEOUT_S = 20.0


@dataclass
class Endpoint:
    """A registered plugin: its stub and the devices it last streamed."""

    request: dp.RegisterRequest
    channel: grpc.Channel
    stub: dp_grpc.DevicePluginStub
    devices: dict[str, str] = field(default_factory=dict)  # ID -> health
    updates: int = 0


@dataclass
class Admitted:
    """What the kubelet got for one container: the Allocate answers merged, the units."""

    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[dp.Mount] = field(default_factory=list)
    devices: list[dp.DeviceSpec] = field(default_factory=list)
    units: dict[str, list[str]] = field(default_factory=dict)


class AdmissionError(Exception):
    """A plugin refused (the message is what `kubectl describe` would show)."""


class FakeKubelet(dp_grpc.RegistrationServicer, pr_grpc.PodResourcesListerServicer):
    def __init__(self, plugin_dir: Path, pod_resources: Path) -> None:
        self.plugin_dir = plugin_dir
        self.socket = plugin_dir / "kubelet.sock"
        self.pod_resources = pod_resources
        self.cond = threading.Condition()
        self.registrations: list[dp.RegisterRequest] = []
        self.endpoints: dict[str, Endpoint] = {}
        self.allocated: dict[tuple[str, str, str], dict[str, list[str]]] = {}  # (ns, pod, c)
        self._server: grpc.Server | None = None
        self._lister: grpc.Server | None = None

    # ---- lifecycle ---------------------------------------------------------------------------

    def start(self) -> None:
        self.plugin_dir.mkdir(parents=True, exist_ok=True)
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        dp_grpc.add_RegistrationServicer_to_server(self, self._server)
        self._server.add_insecure_port(f"unix://{self.socket}")
        self._server.start()
        if self._lister is None:
            self._lister = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
            pr_grpc.add_PodResourcesListerServicer_to_server(self, self._lister)
            self._lister.add_insecure_port(f"unix://{self.pod_resources}")
            self._lister.start()

    def stop(self) -> None:
        for ep in list(self.endpoints.values()):
            ep.channel.close()
        self.endpoints.clear()
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def close(self) -> None:
        self.stop()
        if self._lister is not None:
            self._lister.stop(grace=None).wait()
            self._lister = None

    def restart(self) -> None:
        """As a kubelet restart: its socket recreated, the plugins' sockets deleted."""
        self.stop()
        for path in self.plugin_dir.iterdir():
            path.unlink()
        self.start()

    # ---- Registration ------------------------------------------------------------------------

    def Register(self, request: dp.RegisterRequest, context: grpc.ServicerContext) -> dp.Empty:
        if request.version != "v1beta1":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"version {request.version}")
        channel = grpc.insecure_channel(f"unix://{self.plugin_dir / request.endpoint}")
        ep = Endpoint(request, channel, dp_grpc.DevicePluginStub(channel))
        with self.cond:
            old = self.endpoints.get(request.resource_name)
            if old is not None:
                old.channel.close()
            self.endpoints[request.resource_name] = ep
            self.registrations.append(request)
            self.cond.notify_all()
        threading.Thread(target=self._follow, args=(ep,), daemon=True).start()
        return dp.Empty()

    def _follow(self, ep: Endpoint) -> None:
        with contextlib.suppress(grpc.RpcError, ValueError):
            for update in ep.stub.ListAndWatch(dp.Empty()):
                with self.cond:
                    ep.devices = {d.ID: d.health for d in update.devices}
                    ep.updates += 1
                    self.cond.notify_all()

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            if not self.cond.wait_for(predicate, TIMEOUT_S):
                raise AssertionError(f"timed out waiting for {what}")

    def wait_registered(self, count: int) -> list[dp.RegisterRequest]:
        self.wait(lambda: len(self.registrations) >= count, f"{count} registrations")
        return list(self.registrations)

    def devices(self, resource: str, predicate: Callable[[dict[str, str]], bool] = bool
                ) -> dict[str, str]:
        """The resource's devices once `predicate` holds for them (default: any streamed)."""
        def ready() -> bool:
            ep = self.endpoints.get(resource)
            return ep is not None and ep.updates > 0 and predicate(ep.devices)

        self.wait(ready, f"{resource} devices")
        return dict(self.endpoints[resource].devices)

    def stub(self, resource: str) -> dp_grpc.DevicePluginStub:
        return self.endpoints[resource].stub

    # ---- admission, as the kubelet's device manager ------------------------------------------

    def free(self, resource: str) -> list[str]:
        ep = self.endpoints[resource]
        taken = {u for units in self.allocated.values() for u in units.get(resource, [])}
        return [i for i, h in ep.devices.items() if h == "Healthy" and i not in taken]

    def admit(self, namespace: str, pod: str, containers: dict[str, dict[str, int]]
              ) -> dict[str, Admitted]:
        """Allocate every container's resources in the order given, then PreStartContainer;
        AdmissionError with the plugin's message on a refusal."""
        out: dict[str, Admitted] = {}
        for container, asks in containers.items():
            got = out[container] = Admitted()
            key = (namespace, pod, container)
            self.allocated[key] = got.units
            for resource, count in asks.items():
                ids = self._choose(resource, count)
                try:
                    reply = self.stub(resource).Allocate(dp.AllocateRequest(
                        container_requests=[dp.ContainerAllocateRequest(devices_ids=ids)]))
                except grpc.RpcError as exc:
                    del self.allocated[key]
                    raise AdmissionError(exc.details()) from None
                got.units[resource] = ids
                (resp,) = reply.container_responses
                got.envs.update(resp.envs)
                got.mounts += list(resp.mounts)
                got.devices += list(resp.devices)
        for got in out.values():
            for resource, ids in got.units.items():
                if self.endpoints[resource].request.options.pre_start_required:
                    try:
                        self.stub(resource).PreStartContainer(
                            dp.PreStartContainerRequest(devices_ids=ids), timeout=TIMEOUT_S)
                    except grpc.RpcError as exc:
                        raise AdmissionError(exc.details()) from None
        return out

    def _choose(self, resource: str, count: int) -> list[str]:
        available = self.free(resource)
        if len(available) < count:
            raise AdmissionError(f"Insufficient {resource}: {len(available)} free, {count} asked")
        ep = self.endpoints[resource]
        if ep.request.options.get_preferred_allocation_available:
            reply = ep.stub.GetPreferredAllocation(dp.PreferredAllocationRequest(
                container_requests=[dp.ContainerPreferredAllocationRequest(
                    available_deviceIDs=available, allocation_size=count)]))
            chosen = list(reply.container_responses[0].deviceIDs)
            if len(chosen) == count and set(chosen) <= set(available):
                return chosen
        return available[:count]

    def remove_pod(self, namespace: str, pod: str) -> None:
        for key in [k for k in self.allocated if k[:2] == (namespace, pod)]:
            del self.allocated[key]

    # ---- PodResourcesLister ------------------------------------------------------------------

    def List(self, request: pr.ListPodResourcesRequest, context: grpc.ServicerContext
             ) -> pr.ListPodResourcesResponse:
        pods: dict[tuple[str, str], pr.PodResources] = {}
        for (ns, name, container), units in list(self.allocated.items()):
            pod = pods.setdefault((ns, name), pr.PodResources(name=name, namespace=ns))
            pod.containers.append(pr.ContainerResources(name=container, devices=[
                pr.ContainerDevices(resource_name=r, device_ids=ids) for r, ids in units.items()
            ]))
        return pr.ListPodResourcesResponse(pod_resources=list(pods.values()))
