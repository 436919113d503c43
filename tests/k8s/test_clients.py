"""The agent's pure decisions: a started container's client, gone pods, the config it writes."""

from __future__ import annotations

import re

import pytest

from gemini.core.config import parse_text
from gemini.k8s.clients import (
    MISSING_LISTS,
    Allocation,
    ListedContainer,
    Owner,
    checked_config,
    client_for,
    find_container,
    gone,
    overlapping,
)
from gemini.k8s.podspec import PodError
from gemini.k8s.units import MEMORY_RESOURCE, SHARE_RESOURCE, UnitError

SHARES = tuple(f"g1-s{k}" for k in range(30))


def listed(name="c", shares=SHARES, memory=("g1-m0", "g1-m1")):
    return ListedContainer("ns", "p", name, {SHARE_RESOURCE: shares, MEMORY_RESOURCE: memory})


def pod(annotations=None, uid=None, container_uid=None):
    c = {"name": "c"}
    if container_uid is not None:
        c["securityContext"] = {"runAsUser": container_uid}
    spec = {"containers": [c]}
    if uid is not None:
        spec["securityContext"] = {"runAsUser": uid}
    return {"metadata": {"uid": "u-1", "annotations": annotations or {}}, "spec": spec}


def test_client_for_a_started_container():
    alloc = Allocation("k8s-g1-aa", "1", SHARES)
    c = client_for(alloc, listed(), pod({"gemini.io/gpu-limit": "0.5"}, uid=1000), 256)
    assert (c.spec.name, c.spec.request, c.spec.limit, c.spec.gpu_mem, c.spec.gpu) == (
        "k8s-g1-aa", 0.3, 0.5, 2 * 256 << 20, "1")
    assert c.owner == Owner("ns", "p", "c", "u-1") and str(c.owner) == "ns/p/c"
    assert c.allow_uids == (1000,)
    # the container's own runAsUser wins; root needs no allowance; no limit: the guarantee
    assert client_for(alloc, listed(), pod(uid=1000, container_uid=7)).allow_uids == (7,)
    root = client_for(alloc, listed(), pod(uid=0))
    assert root.allow_uids == () and root.spec.limit == 0.3
    # the webhook's record comes first
    record = {"gemini.io/containers": '{"c": {"share": 30, "limit": 0.9}}',
              "gemini.io/gpu-limit": "0.5"}
    assert client_for(alloc, listed(), pod(record)).spec.limit == 0.9


@pytest.mark.parametrize(("container", "annotations", "error", "message"), [
    (listed(memory=()), {}, PodError, "without gemini.io/gpu-memory"),
    (listed(memory=("g0-m0",)), {}, UnitError, "memory units are on GPU 0 but its"),
    (listed(memory=("g1-m0", "g0-m0")), {}, UnitError, "span several GPUs"),
    (listed(), {"gemini.io/gpu-limit": "0.1"}, PodError, "below the guaranteed share 0.30"),
    (listed(), {"gemini.io/gpu-limit": "2"}, PodError, "at most 1"),
    (listed(), {"gemini.io/gpu-limit": "lots"}, PodError, "is not a number"),
])
def test_client_for_refuses(container, annotations, error, message):
    with pytest.raises(error, match=re.escape(message)):
        client_for(Allocation("k8s-g1-aa", "1", SHARES), container, pod(annotations))


def test_find_container_matches_the_exact_units():
    a, b = listed("a", SHARES[:10]), listed("b", SHARES[10:])
    assert find_container([a, b], reversed(SHARES[10:])) is b
    assert find_container([a, b], SHARES) is None


def test_an_allocation_is_gone_after_missing_lists_in_a_row():
    kept, lost = Allocation("a", "1", SHARES[:10]), Allocation("b", "1", SHARES[10:])
    allocs = [kept, lost]
    now = [listed("a", SHARES[:10])]
    for _ in range(MISSING_LISTS - 1):
        assert gone(allocs, now) == []
    assert gone([kept], [listed("a", SHARES[:10])]) == [] and kept.missing == 0
    assert gone(allocs, now) == [lost]
    # seen again in between: counting starts over
    lost.missing = 0
    gone(allocs, now)
    gone(allocs, [*now, listed("b", SHARES[10:])])
    assert gone(allocs, now) == []


def test_overlapping_allocations_are_dead():
    a, b = Allocation("a", "1", SHARES[:10]), Allocation("b", "1", SHARES[10:20])
    assert overlapping([a, b], SHARES[5:12]) == [a, b]
    assert overlapping([a, b], SHARES[20:]) == []


def test_allocation_record_round_trip_and_config():
    alloc = Allocation("k8s-g1-aa", "1", SHARES)
    assert Allocation.from_json(alloc.to_json()) == alloc
    alloc.client = client_for(alloc, listed(), pod({"gemini.io/gpu-limit": "0.6"}, uid=9))
    assert Allocation.from_json(alloc.to_json()) == alloc
    text, config = checked_config([alloc.client])
    assert text == "1\nk8s-g1-aa 0.3 0.6 2097152 gpu=1  # ns/p/c\n"
    assert parse_text(text) == config and config.clients == (alloc.client.spec,)
    assert checked_config([])[0] == "0\n"
