"""Where the built C parts live; the only way the rest of gemini finds them."""

from __future__ import annotations

from pathlib import Path

NATIVE_DIR = Path(__file__).resolve().parent


class NativeBuildMissing(FileNotFoundError):
    pass


def _existing(path: Path) -> Path:
    if not path.exists():
        raise NativeBuildMissing(f"{path} is not built: run `make build` (or pip install .)")
    return path


def hook_library_path() -> Path:
    """libgemhook.so.1, the LD_PRELOAD hook."""
    return _existing(NATIVE_DIR / "libgemhook.so.1")


def fake_driver_dir() -> Path:
    """Folder holding the fake libcuda.so.1; put it first on LD_LIBRARY_PATH."""
    return _existing(NATIVE_DIR / "fake") and NATIVE_DIR / "fake"


def program_path(name: str) -> Path:
    """A test program built from csrc/fake/programs/<name>.c."""
    return _existing(NATIVE_DIR / "bin" / name)
