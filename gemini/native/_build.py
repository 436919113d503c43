"""The single build path for the C parts (used by `pip install`, `make build` and the tests).

Builds, from csrc/:
- libgemhook.so.1     the LD_PRELOAD hook: csrc/hook/*.c + csrc/common/*.c, a plain C library
                      (no Python symbols: a cffi extension would die under LD_BIND_NOW);
- fake/libcuda.so.1   the fake CUDA driver: csrc/fake/*.c (+ csrc/common/*.c);
- fake/libnvidia-ml.so.1  the fake NVML over the fake driver's GPUs: csrc/fake/nvml/*.c;
- bin/<name>          the test programs csrc/fake/programs/*.c (`direct_*` ones link the driver,
                      `direct_nvml*` ones libnvidia-ml);
- _common             a cffi module over the pure C in csrc/common, for the tests.

`python -m gemini.native._build` builds everything in place, next to this file.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cffi import FFI

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CSRC = ROOT / "csrc"
INCLUDE = CSRC / "include"
CFLAGS = ["-std=gnu11", "-O2", "-g", "-fPIC", "-Wall", "-Wextra", "-Werror", f"-I{INCLUDE}"]
# cffi's cdef understands declarations and `#define NAME <int>` only.
_CDEF_HEADERS = ["wire.h", "predictor.h", "share.h", "roundtrip.h", "ticks.h", "lanes.h",
                 "spans.h", "cost.h", "jitter.h"]
_DEFINE = re.compile(r"^#define\s+\w+\s+-?\d+\s*$")


def _c_sources(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.glob("*.c"))]


def _cc() -> list[str]:
    return shlex.split(os.environ.get("CC", "cc"))


def _run(cmd: list[str]) -> None:
    print(" ".join(cmd), file=sys.stderr)
    subprocess.run(cmd, check=True)


LIBS = ("-ldl", "-lpthread", "-lrt")  # what every library here links


def _shared_library(out: Path, sources: list[str], soname: str, extra: list[str],
                    libs: tuple[str, ...] = LIBS) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*_cc(), *CFLAGS, "-shared", f"-Wl,-soname,{soname}", "-o", str(out), *sources]
    _run(cmd + extra + list(libs))


def _glibc_compat() -> tuple[list[str], tuple[str, ...]]:
    """The hook's flags and libraries for loading on a glibc older than the one here
    (csrc/hook/glibc_compat.h says why); none where this glibc has no libdl.so.2 to name."""
    header = CSRC / "hook" / "glibc_compat.h"
    found = subprocess.run([*_cc(), "-print-file-name=libdl.so.2"], capture_output=True,
                           text=True, check=False).stdout.strip()
    if not header.exists() or not os.path.isabs(found):
        return [], LIBS
    return (["-include", str(header)],
            ("-Wl,--push-state,--no-as-needed", "-l:libdl.so.2", "-l:libpthread.so.0",
             "-Wl,--pop-state", "-lrt"))


def build_hook(out_dir: Path) -> Path:
    out = out_dir / "libgemhook.so.1"
    compat, libs = _glibc_compat()
    extra = [*compat, "-fvisibility=hidden", "-Wl,-z,defs", "-Wl,-z,now"]
    version_script = CSRC / "hook" / "libgemhook.map"
    if version_script.exists():
        extra.append(f"-Wl,--version-script={version_script}")
    _shared_library(out, _c_sources(CSRC / "hook") + _c_sources(CSRC / "common"), out.name, extra,
                    libs)
    return out


def build_fake_driver(out_dir: Path) -> Path:
    fake_dir = out_dir / "fake"
    out = fake_dir / "libcuda.so.1"
    extra = ["-Wl,-z,defs"]
    version_script = CSRC / "fake" / "libcuda.map"
    if version_script.exists():
        extra.append(f"-Wl,--version-script={version_script}")
    _shared_library(out, _c_sources(CSRC / "fake") + _c_sources(CSRC / "common"), out.name, extra)
    link = fake_dir / "libcuda.so"
    if not link.exists():
        link.symlink_to(out.name)
    if _c_sources(CSRC / "fake" / "nvml"):
        build_fake_nvml(out_dir)  # beside it, and over it: always built together
    return out


def build_fake_nvml(out_dir: Path) -> Path:
    """Built by build_fake_driver, after the driver: it reads the simulated GPUs through the
    driver's fake_* API."""
    fake_dir = out_dir / "fake"
    out = fake_dir / "libnvidia-ml.so.1"
    extra = [
        "-Wl,-z,defs",
        f"-Wl,--version-script={CSRC / 'fake' / 'nvml' / 'libnvidia-ml.map'}",
        f"-L{fake_dir}",
        "-l:libcuda.so.1",
        "-Wl,-rpath,$ORIGIN",
    ]
    _shared_library(out, _c_sources(CSRC / "fake" / "nvml"), out.name, extra)
    return out


def _program_libraries(stem: str, fake_dir: Path) -> list[str]:
    if stem.startswith("direct_nvml"):
        return [f"-L{fake_dir}", "-l:libnvidia-ml.so.1", "-Wl,-rpath-link," + str(fake_dir)]
    if stem.startswith("direct"):
        return [f"-L{fake_dir}", "-l:libcuda.so.1"]
    return []


def build_programs(out_dir: Path) -> list[Path]:
    bin_dir = out_dir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    built = []
    for src in sorted((CSRC / "fake" / "programs").glob("*.c")):
        out = bin_dir / src.stem
        link = _program_libraries(src.stem, out_dir / "fake")
        _run([*_cc(), *CFLAGS, "-o", str(out), str(src), *link, "-ldl", "-lpthread", "-lm"])
        built.append(out)
    return built


def build_native(out_dir: Path) -> None:
    if _c_sources(CSRC / "hook"):
        build_hook(out_dir)
    if _c_sources(CSRC / "fake"):
        build_fake_driver(out_dir)
        build_programs(out_dir)


def _cdef_text() -> str:
    lines = []
    for name in _CDEF_HEADERS:
        path = INCLUDE / "gemini" / name
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if not line.startswith("#") or _DEFINE.match(line):
                lines.append(line)
    return "\n".join(lines)


def make_ffi(absolute_sources: bool) -> FFI:
    """The cffi module over csrc/common.  setuptools wants source paths relative to the project
    root; a direct `compile()` runs in a build folder and needs them absolute."""
    ffi = FFI()
    ffi.cdef(_cdef_text())
    sources = _c_sources(CSRC / "common")
    ffi.set_source(
        "gemini.native._common",
        "\n".join(
            f'#include "gemini/{h}"' for h in _CDEF_HEADERS if (INCLUDE / "gemini" / h).exists()
        ),
        sources=sources if absolute_sources else [os.path.relpath(p, ROOT) for p in sources],
        include_dirs=[str(INCLUDE)],
        extra_compile_args=["-std=gnu11"],
    )
    return ffi


ffibuilder = make_ffi(absolute_sources=False)


def main() -> int:
    build_native(HERE)
    make_ffi(absolute_sources=True).compile(tmpdir=str(ROOT / "build" / "cffi"), verbose=False)
    built = next((ROOT / "build" / "cffi" / "gemini" / "native").glob("_common*.so"))
    target = HERE / built.name
    target.write_bytes(built.read_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main())
