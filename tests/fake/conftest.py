"""Fixtures for the fake CUDA driver's own tests: build it (through gemini.native._build), a fresh
simulated GPU per test (unique shared-memory segment), its control API over cffi ABI mode, and a
runner for the client programs."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from cffi import FFI

from gemini import native
from gemini.native import _build

CONTROL_HEADER = _build.CSRC / "fake" / "fake_extra.h"
_CONTROL_DECL = re.compile(r"^(?:int|void|uint64_t|const char \*)\s*\**fake_\w+\([^)]*\);")


def control_cdef() -> str:
    """The fake_* declarations of fake_extra.h, the one place they are written."""
    lines = [
        m.group(0)
        for line in CONTROL_HEADER.read_text().splitlines()
        if (m := _CONTROL_DECL.match(line))
    ]
    assert lines, "no fake_* declarations found"
    return "\n".join(lines)


@pytest.fixture(scope="session")
def fake_built() -> Path:
    """Build the fake driver and the programs (only those: the hook is someone else's)."""
    _build.build_fake_driver(native.NATIVE_DIR)
    _build.build_programs(native.NATIVE_DIR)
    return native.fake_driver_dir() / "libcuda.so.1"


@pytest.fixture(scope="module")
def control(fake_built: Path) -> Iterator[Any]:
    ffi = FFI()
    ffi.cdef(control_cdef())
    ffi.cdef("""
        int cuGetProcAddress(const char *, void **, int, uint64_t);
        int cuGetProcAddress_v2(const char *, void **, int, uint64_t, int *);
        int cuMemGetInfo_v2(size_t *, size_t *);
        int cuGetErrorName(int, const char **);
    """)
    lib = ffi.dlopen(str(fake_built))
    yield ffi, lib
    # Unload it again: later tests in this interpreter that dlopen("libcuda.so.1") (a real GPU
    # run) must not be handed the fake, which glibc would do by soname while it is loaded.
    ffi.dlclose(lib)


@dataclass
class FakeGpu:
    """One simulated GPU (a fresh segment), its control API and a program runner."""

    ffi: Any
    lib: Any
    segment: str
    env: dict[str, str]
    procs: list[subprocess.Popen[str]] = field(default_factory=list)

    def spawn(
        self, program: str, *args: str, env: dict[str, str] | None = None, stdin: int | None = None
    ) -> subprocess.Popen[str]:
        p = subprocess.Popen(
            [str(native.program_path(program)), *args],
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=stdin,
            env={**self.env, **(env or {})},
        )
        self.procs.append(p)
        return p

    def run(
        self, program: str, *args: str, env: dict[str, str] | None = None, timeout: float = 20
    ) -> list[dict[str, Any]]:
        """Run to the end; every stdout line parsed as JSON."""
        p = self.spawn(program, *args, env=env)
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, (p.returncode, out, err)
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def run1(self, program: str, *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
        return self.run(program, *args, env=env)[-1]

    def mem_used(self, dev: int = 0) -> int:
        return int(self.lib.fake_mem_used(dev))


@pytest.fixture
def gpu(control: Any, fake_gpu_segment: str) -> Iterator[FakeGpu]:
    ffi, lib = control
    segment = fake_gpu_segment
    assert lib.fake_attach(segment.encode()) == 0
    lib.fake_reset()
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(native.fake_driver_dir()),
        "GEMINI_FAKE_GPU": segment,
    }
    for var in ("POD_NAME", "GEMINI_FAKE_KERNEL_NS", "GEMINI_FAKE_DEVICES", "LD_PRELOAD"):
        env.pop(var, None)
    g = FakeGpu(ffi, lib, segment, env)
    yield g
    for p in g.procs:
        if p.poll() is None:
            p.kill()
            p.wait()
    lib.fake_unlink()
