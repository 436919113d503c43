"""What the device plugin advertises and hands out: units of GPU time and of GPU memory.

The kubelet counts devices, so a GPU share is advertised as units: 100 share units per GPU
(`gemini.io/gpu-share: 30` is 30 of them, a guaranteed 0.30 of one GPU) and one memory unit per
`unit_mib` MiB of the GPU (`gemini.io/gpu-memory`, 1 MiB by default).  A unit's ID names its GPU
(`g0-s17`, `g1-m4095`), so any set of IDs tells which GPUs it spans.  A container's units must all
come from one GPU: `preferred` picks them so, and `one_gpu` refuses a set that is not.

Pure: IDs in, IDs out; no gRPC, no clock.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SHARE_RESOURCE = "gemini.io/gpu-share"
MEMORY_RESOURCE = "gemini.io/gpu-memory"
SHARES_PER_GPU = 100
HEALTHY = "Healthy"
UNHEALTHY = "Unhealthy"
_ID = re.compile(r"g(\d+)-([sm])(\d+)")


class Kind(enum.Enum):
    SHARE = "s"
    MEMORY = "m"

    @property
    def resource(self) -> str:
        return SHARE_RESOURCE if self is Kind.SHARE else MEMORY_RESOURCE


class UnitError(ValueError):
    """IDs the plugin cannot serve; the message is what the kubelet shows the user."""


@dataclass(frozen=True)
class Gpu:
    """One GPU of the node: `index` as nvidia-smi numbers it (the config's `gpu=`), `minor` the
    N of /dev/nvidiaN (None: same as the index)."""

    index: str
    uuid: str
    memory_mib: int
    minor: int | None = None

    @property
    def device_minor(self) -> int:
        return int(self.index) if self.minor is None else self.minor


def unit_id(gpu: str, kind: Kind, number: int) -> str:
    return f"g{gpu}-{kind.value}{number}"


def parse_unit(device_id: str) -> tuple[str, Kind, int]:
    """(GPU index, kind, number) of a unit ID; UnitError for anything else."""
    m = _ID.fullmatch(device_id)
    if m is None:
        raise UnitError(f"{device_id!r} is not a gemini unit ID (like g0-s17 or g0-m4095)")
    return str(int(m.group(1))), Kind(m.group(2)), int(m.group(3))


def unit_count(gpu: Gpu, kind: Kind, unit_mib: int = 1) -> int:
    return SHARES_PER_GPU if kind is Kind.SHARE else gpu.memory_mib // unit_mib


def units(gpu: Gpu, kind: Kind, unit_mib: int = 1) -> list[str]:
    """Every unit of one kind of a GPU, in order."""
    return [unit_id(gpu.index, kind, k) for k in range(unit_count(gpu, kind, unit_mib))]


def by_gpu(ids: Iterable[str], kind: Kind) -> dict[str, list[str]]:
    """IDs grouped by GPU (in first-seen order); UnitError for an ID of another kind."""
    groups: dict[str, list[str]] = {}
    for device_id in ids:
        gpu, found, _ = parse_unit(device_id)
        if found is not kind:
            raise UnitError(f"{device_id!r} is a {found.resource} unit, not a {kind.resource} one")
        groups.setdefault(gpu, []).append(device_id)
    return groups


def one_gpu(ids: Sequence[str], kind: Kind) -> str:
    """The one GPU that all `ids` are on; UnitError naming the split when they span several."""
    if not ids:
        raise UnitError(f"no {kind.resource} units to allocate")
    groups = by_gpu(ids, kind)
    if len(groups) > 1:
        spread = ", ".join(f"GPU {gpu}: {len(g)}" for gpu, g in sorted(groups.items()))
        raise UnitError(
            f"{kind.resource}: {len(ids)} units span several GPUs ({spread}); a container's "
            "units must all come from one GPU and no GPU of this node had enough free: ask "
            "for less, or wait for a GPU to have room"
        )
    return next(iter(groups))


def _number(device_id: str) -> int:
    return parse_unit(device_id)[2]


def preferred(
    available: Sequence[str], must_include: Sequence[str], size: int, hint: str | None = None
) -> list[str]:
    """The `size` units to allocate, chosen from `available` (which holds `must_include`).

    All from one GPU when one can hold them with `must_include`: the `hint` GPU if it can (the
    GPU of the container's other resource), else the fullest one that still fits (best fit, so
    that large requests find room later), lowest index first on ties; on it, the lowest-numbered
    units.  When no GPU can, the split with the fewest GPUs (the kubelet will then ask Allocate,
    which refuses it with a clear message).
    """
    kind = parse_unit(available[0])[1] if available else Kind.SHARE
    free = by_gpu(available, kind) if available else {}
    for group in free.values():
        group.sort(key=_number)
    chosen = list(dict.fromkeys(must_include))
    need = size - len(chosen)
    if need <= 0:
        return chosen
    must_gpus = set(by_gpu(chosen, kind)) if chosen else set()

    def rest(gpu: str) -> list[str]:
        return [u for u in free.get(gpu, []) if u not in chosen]

    fits = [
        gpu for gpu in free
        if must_gpus <= {gpu} and len(rest(gpu)) >= need
    ]
    if fits:
        if hint is not None and hint in fits:
            gpu = hint
        else:
            gpu = min(fits, key=lambda g: (len(rest(g)), int(g)))
        return chosen + rest(gpu)[:need]
    # No single GPU: fill from the GPUs with the most free units (the must_include ones first).
    order = sorted(free, key=lambda g: (g not in must_gpus, -len(rest(g)), int(g)))
    for gpu in order:
        take = rest(gpu)[:need]
        chosen += take
        need -= len(take)
        if need == 0:
            break
    return chosen

