"""From the kubelet's allocations to gemini clients: the node agent's decisions, without I/O.

* An **allocation** is one container's share units, as the kubelet handed them to Allocate; the
  agent names it (the client name the hook will use) before it knows the pod, because Allocate
  sees device IDs only.
* The **owner** comes later, from the kubelet's PodResources API (which pod and container got
  those IDs, and the container's memory units) and the pod itself from the API server (its uid,
  annotations, runAsUser): `client_for` turns them into the client's `ClientSpec`.
* An allocation whose IDs the kubelet no longer lists for `MISSING_LISTS` lists in a row is gone
  (`gone`): its pod was deleted, or its admission failed after Allocate.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from gemini.core.config import ClientSpec, ResourceConfig, parse_text
from gemini.k8s import podspec
from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE, Kind, UnitError, one_gpu

MIB = 1 << 20
MISSING_LISTS = 2  # an allocation is listed right after Allocate returns; two lists is no race


@dataclass(frozen=True)
class ListedContainer:
    """One container of the kubelet's PodResources List, with its devices per resource."""

    namespace: str
    pod: str
    container: str
    devices: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Owner:
    namespace: str
    pod: str
    container: str
    uid: str = ""  # the pod's metadata.uid: a pod re-created under the same name is another

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}/{self.container}"


@dataclass(frozen=True)
class Client:
    """What runs for one admitted container: its config line and who may use its socket."""

    spec: ClientSpec
    owner: Owner
    allow_uids: tuple[int, ...] = ()


@dataclass
class Allocation:
    """One container's share units and, once its container starts, its client."""

    name: str
    gpu: str
    share_ids: tuple[str, ...]
    client: Client | None = None
    missing: int = field(default=0, compare=False)  # lists in a row without these IDs

    @property
    def key(self) -> frozenset[str]:
        return frozenset(self.share_ids)

    def to_json(self) -> str:
        data: dict[str, Any] = {"name": self.name, "gpu": self.gpu,
                                "share_ids": list(self.share_ids), "client": None}
        if self.client is not None:
            spec = self.client.spec
            data["client"] = {"spec": {"request": spec.request, "limit": spec.limit,
                                       "gpu_mem": spec.gpu_mem},
                              "owner": asdict(self.client.owner),
                              "allow_uids": list(self.client.allow_uids)}
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Allocation:
        """The record `to_json` wrote; ValueError (KeyError, TypeError) for anything else."""
        data = json.loads(text)
        client = None
        if data.get("client"):
            raw = data["client"]
            spec = raw["spec"]
            client = Client(
                ClientSpec(name=str(data["name"]), request=float(spec["request"]),
                           limit=float(spec["limit"]), gpu_mem=int(spec["gpu_mem"]),
                           gpu=str(data["gpu"])),
                Owner(**raw["owner"]), tuple(int(u) for u in raw["allow_uids"]))
        return cls(str(data["name"]), str(data["gpu"]), tuple(data["share_ids"]), client)


def find_container(listed: Iterable[ListedContainer], share_ids: Iterable[str]
                   ) -> ListedContainer | None:
    """The container whose share units are exactly `share_ids`."""
    want = frozenset(share_ids)
    for c in listed:
        if frozenset(c.devices.get(SHARE_RESOURCE, ())) == want:
            return c
    return None


def client_for(
    allocation: Allocation,
    container: ListedContainer,
    pod: Mapping[str, Any],
    memory_unit_mib: int = 1,
) -> Client:
    """The client of a started container; PodError or UnitError (messages for the user)."""
    where = f"{container.namespace}/{container.pod}/{container.container}"
    memory_ids = container.devices.get(MEMORY_RESOURCE, ())
    if not memory_ids:
        raise podspec.PodError(f"{where} asks for {SHARE_RESOURCE} without "
                               f"{MEMORY_RESOURCE}: gemini needs a memory limit (install the "
                               "webhook, which adds one, or ask for it)")
    memory_gpu = one_gpu(memory_ids, Kind.MEMORY)
    if memory_gpu != allocation.gpu:
        raise UnitError(f"{where}: its {MEMORY_RESOURCE} units are on GPU {memory_gpu} but its "
                        f"{SHARE_RESOURCE} units on GPU {allocation.gpu}; both must be on one "
                        "GPU (this node had no GPU with room for both): delete the pod to retry")
    ask = podspec.ContainerAsk(container.container, len(allocation.share_ids), len(memory_ids))
    metadata = pod.get("metadata") or {}
    limit = podspec.limit_of(metadata.get("annotations") or {}, ask)
    spec = ClientSpec(name=allocation.name, request=ask.request, limit=limit,
                      gpu_mem=len(memory_ids) * memory_unit_mib * MIB, gpu=allocation.gpu)
    owner = Owner(container.namespace, container.pod, container.container,
                  str(metadata.get("uid", "")))
    uid = podspec.run_as_user(pod, container.container)
    allow = () if uid is None or uid == 0 else (uid,)
    return Client(spec, owner, allow)


def gone(allocations: Iterable[Allocation], listed: Sequence[ListedContainer]) -> list[Allocation]:
    """Count each allocation missing from this list; those missing `MISSING_LISTS` in a row."""
    present = {frozenset(c.devices.get(SHARE_RESOURCE, ())) for c in listed}
    out = []
    for a in allocations:
        a.missing = 0 if a.key in present else a.missing + 1
        if a.missing >= MISSING_LISTS:
            out.append(a)
    return out


def overlapping(allocations: Iterable[Allocation], share_ids: Iterable[str]) -> list[Allocation]:
    """Allocations holding any of these units: the kubelet hands out only free units, so their
    containers are gone (a pod deleted and its units given to a new one before we noticed)."""
    ids = set(share_ids)
    return [a for a in allocations if ids & set(a.share_ids)]


def render_config(clients: Iterable[Client]) -> str:
    """The resource config of these clients, each line ending with its owner as a comment (so
    the file on the node says which pod each client is)."""
    lines = []
    for c in clients:
        s = c.spec
        lines.append(f"{s.name} {s.request!r} {s.limit!r} {s.gpu_mem} gpu={s.gpu}  # {c.owner}")
    return f"{len(lines)}\n" + "".join(f"{line}\n" for line in lines)


def checked_config(clients: Iterable[Client]) -> tuple[str, ResourceConfig]:
    """The config text and what the scheduler will read from it (ConfigError if anything is
    off, before a scheduler sees it)."""
    text = render_config(clients)
    return text, parse_text(text, "the agent's config")

