"""Fixtures shared by the test folders."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from cffi import FFI

from gemini.native import fake_driver_dir
from tests.fake.conftest import control_cdef


@pytest.fixture
def fake() -> Iterator[Any]:
    """The fake driver's control API (fake_attach to a segment, then its counters).  Unloaded
    after the test: a later real-GPU test's dlopen("libcuda.so.1") must not get the fake."""
    ffi = FFI()
    ffi.cdef(control_cdef())
    lib = ffi.dlopen(str(fake_driver_dir() / "libcuda.so.1"))
    yield lib
    ffi.dlclose(lib)
