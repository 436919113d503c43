"""cuda_subset.h matches the real cuda.h (run only where the CUDA toolkit's header exists):
struct layouts and enum values through two translation units, and every prototype by
redeclaring it after cuda.h (an incompatible redeclaration does not compile)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from gemini.native import _build

CUDA_H = Path("/usr/local/cuda/include/cuda.h")
HERE = Path(__file__).resolve().parent / "cuda_abi"
SUBSET = _build.INCLUDE / "gemini" / "cuda_subset.h"

pytestmark = pytest.mark.skipif(not CUDA_H.exists(), reason="no CUDA toolkit header here")


def cc(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [*_build._cc(), "-std=gnu11", "-Wall", "-Werror", f"-I{_build.INCLUDE}",
           f"-I{CUDA_H.parent}", f"-I{HERE}", *args]
    return subprocess.run(cmd, capture_output=True, text=True)


def test_layouts_and_values(tmp_path):
    exe = tmp_path / "layout"
    r = cc("-o", str(exe), *(str(HERE / f) for f in
                             ("layout_subset.c", "layout_real.c", "layout_main.c")))
    assert r.returncode == 0, r.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout


def test_prototypes_are_compatible(tmp_path):
    text = SUBSET.read_text()
    section = text.split("/* ---- functions", 1)[1].split("#ifdef __cplusplus", 1)[0]
    section = section.split("\n", 1)[1]
    names = re.findall(r"CUresult (cu\w+)\(", section)
    assert len(names) > 60
    undefs = "\n".join(f"#undef {n}" for n in names)
    src = tmp_path / "protos.c"
    # cuGetProcAddress is cuda.h's macro for _v2; our 4-argument one is the CUDA 11 ABI, which
    # cuda.h no longer declares, so that one redeclaration checks nothing.
    src.write_text(f"#include <cuda.h>\n{undefs}\n{section}\n")
    r = cc("-fsyntax-only", str(src))
    assert r.returncode == 0, r.stderr
