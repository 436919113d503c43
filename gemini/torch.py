"""Opt-in PyTorch helpers for unified-memory mode (README: Unified-memory mode).

PyTorch's caching allocator keeps freed blocks.  Under unified-memory mode those blocks are
still live managed allocations to the hook, so they are prefetched at every token grant (and
evicted at release) although nobody uses them.  Gemini_UM called
`c10::cuda::CUDACachingAllocator::emptyCache()` from the hook's thread; that C++ call is ABI
fragile and not ours to make from a foreign thread (spec §14.2 item 14).  Instead the
application releases the cache itself, from Python, between steps:

    import gemini.torch
    for batch in loader:
        step(batch)
        gemini.torch.release_cached_memory()

or lets a timer in its own process do it (`gemini.torch.install(interval_s=2.0)`), which is less
exact (it may run mid-step; `empty_cache` only frees unused blocks, so that is safe, just less
useful).  `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False` keeps allocations on the plain
cuMemAlloc path the hook converts (expandable segments use the VMM API, which stays device
memory).

Importing this module does not import torch; the functions do, when called.
"""

from __future__ import annotations

import threading
from typing import Any

_timer: threading.Thread | None = None
_stop = threading.Event()


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise RuntimeError("gemini.torch needs PyTorch (pip install torch)") from exc
    return torch


def release_cached_memory() -> int:
    """Give PyTorch's cached, unused CUDA blocks back (torch.cuda.empty_cache()).

    Returns the bytes released (reserved before minus after), 0 without CUDA initialised.
    """
    torch = _torch()
    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return 0
    before = int(torch.cuda.memory_reserved())
    torch.cuda.empty_cache()
    return max(before - int(torch.cuda.memory_reserved()), 0)


def install(interval_s: float = 2.0) -> None:
    """Release the cache every `interval_s` seconds from a daemon thread (idempotent)."""
    global _timer
    if interval_s <= 0:
        raise ValueError("interval_s must be > 0")
    _torch()  # fail now, not in the thread
    if _timer is not None and _timer.is_alive():
        return
    _stop.clear()

    def loop() -> None:
        while not _stop.wait(interval_s):
            release_cached_memory()

    _timer = threading.Thread(target=loop, name="gemini-empty-cache", daemon=True)
    _timer.start()


def uninstall() -> None:
    """Stop the thread `install` started."""
    global _timer
    _stop.set()
    if _timer is not None:
        _timer.join(timeout=5.0)
    _timer = None
