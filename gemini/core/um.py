"""Unified-memory mode (Gemini_UM, spec §11, §14.2 item 14): the scheduler-side rules, pure.

A UM client's device allocations are served as managed memory by its hook, which prefetches them
to the GPU when a token arrives (and, with evict-on-release, back to the host when it ends).  So
the clients' memory limits may add up to more than the card has: the card pages.  This module
says which clients are UM, what the hook is told (the MEM_LIMIT reply's flags word), how far the
UM limits may oversubscribe the card, and how long a UM client's quota must at least be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gemini.core.config import ClientSpec, ConfigError, ResourceConfig
from gemini.core.wire import MEM_FLAG_EVICT_ON_RELEASE, MEM_FLAG_UNIFIED_MEMORY

# Prefetch moves ~48 GB/s on an H100 (page faults ~8 GB/s, perf-anchors §3.4): a few GiB cost
# ~0.1 s, which a 1 s quota keeps to a small fraction of the time it buys.
DEFAULT_UM_MIN_QUOTA_S = 1.0


@dataclass(frozen=True)
class UmPolicy:
    """gem-schd's UM flags.

    all_clients: --unified-memory (every client is UM, whatever its config line says).
    evict_on_release: --evict-on-release (UM clients' data goes back to the host at token end).
    device_memory: --device-memory, the card's bytes; None: unknown, no oversubscription check.
    oversubscription: --oversubscription, how many times the card the UM limits may add up to.
    min_quota_s: --um-min-quota, the shortest quota a UM client is granted.
    """

    all_clients: bool = False
    evict_on_release: bool = False
    device_memory: int | None = None
    oversubscription: float = 1.0
    min_quota_s: float = DEFAULT_UM_MIN_QUOTA_S

    def __post_init__(self) -> None:
        if not 0 < self.oversubscription < math.inf:
            raise ValueError(f"oversubscription must be > 0 and finite, got "
                             f"{self.oversubscription!r}")
        if self.device_memory is not None and self.device_memory <= 0:
            raise ValueError(f"device memory must be > 0 bytes, got {self.device_memory!r}")
        if not 0 <= self.min_quota_s < math.inf:
            raise ValueError(f"the UM minimum quota must be >= 0 and finite, got "
                             f"{self.min_quota_s!r}")


def is_um(spec: ClientSpec, policy: UmPolicy) -> bool:
    return policy.all_clients or spec.unified_memory


def mem_flags(spec: ClientSpec, policy: UmPolicy) -> int:
    """The flags word of this client's MEM_LIMIT replies."""
    if not is_um(spec, policy):
        return 0
    flags = MEM_FLAG_UNIFIED_MEMORY
    if policy.evict_on_release:
        flags |= MEM_FLAG_EVICT_ON_RELEASE
    return flags


def um_quota(quota_s: float, spec: ClientSpec, policy: UmPolicy, window_s: float) -> float:
    """A UM client's grant: at least its UM minimum (um_least_s), so that migration stays a
    small part of it."""
    return max(quota_s, um_least_s(spec, policy, window_s)) if is_um(spec, policy) else quota_s


def um_least_s(spec: ClientSpec, policy: UmPolicy, window_s: float) -> float:
    """A UM client's shortest grant: --um-min-quota, and for a capped one a whole part of what
    its long window (`window_s`) allows, so that grants of it fill the window to its cap and
    no further (the scheduler waits for room for a whole one): at least half the minimum, or
    the whole allowance where that is less.  A 1 s minimum granted wherever a capped client
    went took a 0.05 cap's 10 s windows to 0.100, a 0.12 cap's to 0.200 (its minute 0.133) and
    a 0.35 cap's to 0.400; whole 1 s grants in room for them, a 0.25 cap to 0.200 over every
    window (three do not fit 2.5 s), 0.833 s ones to its cap (simulator)."""
    least = policy.min_quota_s
    if not spec.capped or least <= 0.0:
        return least
    allowed = spec.limit * window_s
    return allowed / math.ceil(allowed / least)


def um_bytes(config: ResourceConfig, policy: UmPolicy) -> int:
    return sum(c.gpu_mem for c in config.clients if is_um(c, policy))


def oversubscription_problem(config: ResourceConfig, policy: UmPolicy) -> str | None:
    """Why `config` oversubscribes the card past the allowed ratio, or None when it does not
    (or when the card's memory is unknown)."""
    if policy.device_memory is None:
        return None
    total = um_bytes(config, policy)
    allowed = policy.oversubscription * policy.device_memory
    if total <= allowed:
        return None
    names = ", ".join(c.name for c in config.clients if is_um(c, policy))
    return (
        f"unified-memory clients ({names}) ask for {total} B in all, more than "
        f"{policy.oversubscription:g} x the device's {policy.device_memory} B "
        f"(= {int(allowed)} B); raise --oversubscription or lower their GPU_MEM"
    )


def check_oversubscription(config: ResourceConfig, policy: UmPolicy, source: str) -> None:
    """Raise ConfigError (naming `source`) if `config` oversubscribes the card too far."""
    problem = oversubscription_problem(config, policy)
    if problem is not None:
        raise ConfigError(source, None, problem)
