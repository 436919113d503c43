"""gemini.torch imports without PyTorch and calls torch.cuda.empty_cache() when asked."""

from __future__ import annotations

import sys
import types

import pytest


def fake_torch(initialized: bool = True) -> tuple[types.ModuleType, list[str]]:
    calls: list[str] = []
    reserved = [3 << 20]
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        is_initialized=lambda: initialized,
        memory_reserved=lambda: reserved[0],
        empty_cache=lambda: (calls.append("empty_cache"), reserved.__setitem__(0, 1 << 20)),
    )
    mod = types.ModuleType("torch")
    mod.cuda = cuda  # type: ignore[attr-defined]
    return mod, calls


def test_import_does_not_need_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    import gemini.torch as gt

    with pytest.raises(RuntimeError, match="needs PyTorch"):
        gt.release_cached_memory()


def test_release_calls_empty_cache(monkeypatch):
    mod, calls = fake_torch()
    monkeypatch.setitem(sys.modules, "torch", mod)
    import gemini.torch as gt

    assert gt.release_cached_memory() == 2 << 20
    assert calls == ["empty_cache"]
    mod, calls = fake_torch(initialized=False)
    monkeypatch.setitem(sys.modules, "torch", mod)
    assert gt.release_cached_memory() == 0 and calls == []
    with pytest.raises(ValueError):
        gt.install(0)
