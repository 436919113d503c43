"""The agent as the kubelet's client: registering a device plugin, listing pod resources."""

from __future__ import annotations

from pathlib import Path

import grpc

from gemini.k8s.api import deviceplugin_pb2 as dp
from gemini.k8s.api import deviceplugin_pb2_grpc as dp_grpc
from gemini.k8s.api import podresources_pb2 as pr
from gemini.k8s.api import podresources_pb2_grpc as pr_grpc
from gemini.k8s.clients import ListedContainer

API_VERSION = "v1beta1"
KUBELET_SOCKET = "kubelet.sock"
DEVICE_PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
POD_RESOURCES_SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
CALL_TIMEOUT_S = 10.0


def target(path: Path) -> str:
    return f"unix://{path}"


async def register(
    kubelet_socket: Path, endpoint: str, resource: str, options: dp.DevicePluginOptions
) -> None:
    """Register one resource; grpc.aio.AioRpcError when the kubelet refuses or is not there."""
    async with grpc.aio.insecure_channel(target(kubelet_socket)) as channel:
        stub = dp_grpc.RegistrationStub(channel)
        request = dp.RegisterRequest(version=API_VERSION, endpoint=endpoint,
                                     resource_name=resource, options=options)
        await stub.Register(request, timeout=CALL_TIMEOUT_S)


async def list_pod_resources(socket: Path) -> list[ListedContainer]:
    """Every container the kubelet knows with its devices; grpc.aio.AioRpcError on failure."""
    async with grpc.aio.insecure_channel(
        target(socket), options=[("grpc.max_receive_message_length", 64 << 20)]
    ) as channel:
        stub = pr_grpc.PodResourcesListerStub(channel)
        reply = await stub.List(pr.ListPodResourcesRequest(), timeout=CALL_TIMEOUT_S)
    out = []
    for pod in reply.pod_resources:
        for c in pod.containers:
            devices: dict[str, tuple[str, ...]] = {}
            for d in c.devices:
                devices[d.resource_name] = devices.get(d.resource_name, ()) + tuple(d.device_ids)
            out.append(ListedContainer(pod.namespace, pod.name, c.name, devices))
    return out
