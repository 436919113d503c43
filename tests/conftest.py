"""Fixtures shared by the test folders."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
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


@pytest.fixture
def fake_gpu_segment() -> Iterator[str]:
    """A fake GPU of the test's own (GEMINI_FAKE_GPU: its shared-memory segment's name),
    removed afterwards.  A GPU shared with an earlier test runs what that test left queued
    before the kernels of this one (and two test sessions at once ran each other's), and a
    segment left behind keeps its 250 KB of /dev/shm."""
    name = f"/gemini-test-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    yield name
    Path("/dev/shm", name.lstrip("/")).unlink(missing_ok=True)
