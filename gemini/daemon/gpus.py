"""The GPUs this machine has, as nvidia-smi lists them (the config's GPU names are checked
against them: `gemini.core.config.gpu_problems`)."""

from __future__ import annotations

import subprocess


def present_gpus() -> list[tuple[int, str]] | None:
    """(index, UUID) of each GPU nvidia-smi lists; None when it cannot be asked."""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in out.splitlines():
        index, _, uuid = line.partition(",")
        if index.strip().isdigit():
            gpus.append((int(index), uuid.strip()))
    return gpus
