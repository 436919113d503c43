"""cuGetProcAddress answers with our wrapper of exactly the variant the driver gave.

CUDA 13 runtimes ask for "cuCtxSynchronize" at version 13000 and get cuCtxSynchronize_v2, which
takes a context argument; wrapping it as the old one crashed nvcc-built programs on the H100."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from gemini.native import fake_driver_dir, hook_library_path

pytestmark = pytest.mark.hook

PROBE = r"""
import ctypes, json
cuda = ctypes.CDLL("libcuda.so.1")
gpa = cuda.cuGetProcAddress_v2
gpa.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64,
                ctypes.POINTER(ctypes.c_int)]
def lookup(name, version):
    fn, status = ctypes.c_void_p(), ctypes.c_int()
    assert gpa(name.encode(), ctypes.byref(fn), version, 0, ctypes.byref(status)) == 0
    return fn.value
def exported(name):
    return ctypes.cast(getattr(cuda, name), ctypes.c_void_p).value
v2 = lookup("cuCtxSynchronize", 13000)
assert cuda.cuInit(0) == 0
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
assert cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cuda.cuCtxSetCurrent(ctx) == 0
rc = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)(v2)(ctx)
print(json.dumps({
    "sync_13000": v2, "sync_v2": exported("cuCtxSynchronize_v2"), "rc": rc,
    "sync_12000": lookup("cuCtxSynchronize", 12000), "sync_v1": exported("cuCtxSynchronize"),
}))
"""


def test_each_variant_gets_its_own_wrapper(tmp_path, fake_gpu_segment):
    stats = tmp_path / "stats.json"
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_driver_dir()),
           "LD_PRELOAD": str(hook_library_path()), "GEMINI_FAKE_GPU": fake_gpu_segment,
           "GEMINI_HOOK_STATS": str(stats)}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    # dlsym goes through the hook too, so "exported" names give our wrappers: each lookup got
    # the wrapper of its own variant, and calling the _v2 one with a context works.
    assert r["sync_13000"] == r["sync_v2"] != r["sync_v1"] == r["sync_12000"]
    assert r["rc"] == 0
    assert json.loads(stats.read_text())["cuCtxSynchronize_v2"] == 1
