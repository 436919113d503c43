"""Which GPUs the node has: asked of nvidia-smi, or read from a JSON file (tests, the fake GPU).

A scan returns the GPUs present now; the agent compares scans to mark a GPU that disappeared
(fell off the bus, driver reset) unhealthy.  A failed scan is an empty one: with the driver
unreachable no GPU can be served.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
from pathlib import Path

from gemini.k8s.units import Gpu

log = logging.getLogger("gemini.k8s")
QUERY = "index,uuid,memory.total,pci.bus_id"
PROC_GPUS = Path("/proc/driver/nvidia/gpus")
_MINOR = re.compile(r"^Device Minor:\s*(\d+)", re.MULTILINE)


class InventoryError(ValueError):
    pass


def parse_nvidia_smi(text: str, proc: Path = PROC_GPUS) -> list[Gpu]:
    """GPUs from `nvidia-smi --query-gpu=index,uuid,memory.total,pci.bus_id
    --format=csv,noheader,nounits`; the /dev/nvidiaN minor from the driver's /proc entry."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4 or not fields[0].isdigit() or not fields[2].isdigit():
            continue
        index, uuid, memory, bus = fields
        gpus.append(Gpu(index, uuid, int(memory), _minor(proc, bus)))
    return gpus


def _minor(proc: Path, bus_id: str) -> int | None:
    # nvidia-smi prints 00000000:3B:00.0; /proc names it 0000:3b:00.0.
    domain, _, rest = bus_id.partition(":")
    name = f"{domain[-4:]}:{rest}".lower()
    try:
        m = _MINOR.search((proc / name / "information").read_text())
    except OSError:
        return None
    return int(m.group(1)) if m else None


def scan_nvidia_smi(timeout_s: float = 20.0) -> list[Gpu]:
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        log.error("nvidia-smi failed (%s): no GPU is healthy until it answers", exc)
        return []
    return parse_nvidia_smi(out)


def parse_file(text: str, source: str = "<gpus>") -> list[Gpu]:
    """A JSON list of {"index": 0, "uuid": "GPU-…", "memory_mib": 81559, "minor": 0}."""
    try:
        data = json.loads(text)
        gpus = [Gpu(str(int(g["index"])), str(g["uuid"]), int(g["memory_mib"]),
                    None if g.get("minor") is None else int(g["minor"])) for g in data]
    except (ValueError, TypeError, KeyError) as exc:
        raise InventoryError(f"{source}: expected a JSON list of GPUs with index, uuid and "
                             f"memory_mib: {exc}") from None
    return gpus


def scan_file(path: Path) -> list[Gpu]:
    try:
        return parse_file(path.read_text(), str(path))
    except (OSError, InventoryError) as exc:
        log.error("cannot read the GPU list %s (%s): no GPU is healthy until it can", path, exc)
        return []
