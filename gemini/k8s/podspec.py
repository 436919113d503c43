"""What a pod asks of gemini, read from its spec: the webhook checks it, the agent applies it.

A container asks with two extended resources:

    resources: {limits: {gemini.io/gpu-share: 30, gemini.io/gpu-memory: 4096}}

(hundredths of one GPU, guaranteed; memory units, MiB by default, a hard limit), and the pod may
cap every such container above its guarantee with the annotation `gemini.io/gpu-limit: "0.6"`
(work-conserving; without it the cap is the guarantee).  The webhook records what it admitted,
per container, in the annotation `gemini.io/containers` (JSON), which the agent reads first.

Pure: dicts (the pod as the API server serialises it) in, values or PodError out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE, SHARES_PER_GPU

LIMIT_ANNOTATION = "gemini.io/gpu-limit"
CONTAINERS_ANNOTATION = "gemini.io/containers"
HOOK_IN_CONTAINER = "/usr/local/gemini/libgemhook.so.1"  # where the agent's Allocate mounts it


class PodError(ValueError):
    """A request gemini cannot serve; the message is for the pod's owner."""


@dataclass(frozen=True)
class ContainerAsk:
    """One container's gemini resources: `share` in hundredths of a GPU, `memory` in units
    (None: not given)."""

    name: str
    share: int
    memory: int | None

    @property
    def request(self) -> float:
        return self.share / SHARES_PER_GPU


# A Kubernetes quantity: a number, then a binary suffix, a decimal one, or an exponent.  The
# API server hands the webhook each one in its canonical form: 16000 as "16k", 1000000 as "1M".
_QUANTITY = re.compile(r"(?P<number>\d+(?:\.\d*)?|\.\d+)"
                       r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d{1,2})?")
_SUFFIX = {"": 0, "n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def _quantity(text: str) -> Decimal | None:
    """The value of a Kubernetes quantity ("16k", "4Ki", "1e3", "30"), or None."""
    match = _QUANTITY.fullmatch(text)
    if match is None:
        return None
    number, suffix = Decimal(match["number"]), match["suffix"] or ""
    if suffix in _BINARY:
        return number * 2 ** _BINARY[suffix]
    # ("E" alone is exa, 10^18; an exponent has its digits: "1E3")
    exponent = int(suffix[1:]) if len(suffix) > 1 else _SUFFIX[suffix]
    return number.scaleb(exponent)


def whole_number(container: str, resource: str, value: object) -> int:
    """A resource quantity that must be a whole number > 0 ("30", 30, or as the API server
    writes it: "16k" for 16000; it refused every multiple of 1000 but as plain digits)."""
    text = "" if isinstance(value, bool) else str(value).strip()
    number = _quantity(text) if isinstance(value, (str, int)) else None
    if number is None or number <= 0 or number != number.to_integral_value():
        raise PodError(f'container "{container}": {resource} {value!r} must be a whole number '
                       "greater than 0")
    return int(number)


def _resources(container: Mapping[str, Any]) -> dict[str, Any]:
    """The container's gemini quantities: limits, where the API requires extended resources,
    then requests for what limits lack."""
    res = container.get("resources") or {}
    merged: dict[str, Any] = {}
    for part in ("requests", "limits"):
        for key, value in (res.get(part) or {}).items():
            if key in (SHARE_RESOURCE, MEMORY_RESOURCE):
                merged[key] = value
    return merged


def container_ask(container: Mapping[str, Any]) -> ContainerAsk | None:
    """What a container asks for; None when it asks for no gemini resource."""
    name = str(container.get("name", "?"))
    asked = _resources(container)
    if not asked:
        return None
    if SHARE_RESOURCE not in asked:
        raise PodError(f'container "{name}": {MEMORY_RESOURCE} without {SHARE_RESOURCE}: '
                       "memory comes with a share of a GPU's time")
    share = whole_number(name, SHARE_RESOURCE, asked[SHARE_RESOURCE])
    if share > SHARES_PER_GPU:
        raise PodError(f'container "{name}": {SHARE_RESOURCE} {share} is above '
                       f"{SHARES_PER_GPU} (one whole GPU): a share comes from one GPU")
    memory = asked.get(MEMORY_RESOURCE)
    units = None if memory is None else whole_number(name, MEMORY_RESOURCE, memory)
    return ContainerAsk(name, share, units)


def asks(pod: Mapping[str, Any]) -> list[tuple[int, ContainerAsk]]:
    """(index in spec.containers, ask) of each container that asks; PodError for init
    containers that ask (their units would go to the pod's first container after them)."""
    spec = pod.get("spec") or {}
    for init in spec.get("initContainers") or []:
        if container_ask(init) is not None:
            raise PodError(f'init container "{init.get("name", "?")}" asks for '
                           f"{SHARE_RESOURCE}: only regular containers can have a GPU share")
    found = []
    for index, container in enumerate(spec.get("containers") or []):
        ask = container_ask(container)
        if ask is not None:
            found.append((index, ask))
    return found


def parse_limit(value: object, ask: ContainerAsk) -> float:
    """The cap from an annotation value, checked against the container's guarantee."""
    try:
        limit = float(str(value))
    except ValueError:
        raise PodError(f"{LIMIT_ANNOTATION} {value!r} is not a number (a fraction of one GPU, "
                       "like \"0.6\")") from None
    if not math.isfinite(limit) or limit <= 0 or limit > 1:
        raise PodError(f"{LIMIT_ANNOTATION} {value!r} must be above 0 and at most 1 "
                       "(one whole GPU)")
    if limit < ask.request:
        raise PodError(f"{LIMIT_ANNOTATION} {value} is below the guaranteed share "
                       f'{ask.request:.2f} of container "{ask.name}" ({SHARE_RESOURCE}: '
                       f"{ask.share}): the cap must be at least the guarantee")
    return limit


def limit_of(annotations: Mapping[str, Any], ask: ContainerAsk) -> float:
    """The container's cap: the webhook's record, else the pod's annotation, else the
    guarantee."""
    recorded = admitted(annotations).get(ask.name)
    if recorded is not None and "limit" in recorded:
        return parse_limit(recorded["limit"], ask)
    if LIMIT_ANNOTATION in annotations:
        return parse_limit(annotations[LIMIT_ANNOTATION], ask)
    return ask.request


def admitted(annotations: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The webhook's per-container record ({} when absent or unreadable)."""
    raw = annotations.get(CONTAINERS_ANNOTATION)
    if not isinstance(raw, str):
        return {}
    try:
        data = json.loads(raw)
    except ValueError:
        return {}
    return {k: v for k, v in data.items() if isinstance(v, dict)} if isinstance(
        data, dict) else {}


def run_as_user(pod: Mapping[str, Any], container: str) -> int | None:
    """The uid the container's processes run as, when the spec says (container first)."""
    spec = pod.get("spec") or {}
    for c in spec.get("containers") or []:
        if c.get("name") == container:
            uid = (c.get("securityContext") or {}).get("runAsUser")
            if isinstance(uid, int):
                return uid
    uid = (spec.get("securityContext") or {}).get("runAsUser")
    return uid if isinstance(uid, int) else None
