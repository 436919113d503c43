"""NVIDIA MPS for spatial partitions (issue 13): what launch-backend, gem-schd and launch-command
tell each other, and the environment of a partition's client.  Pure: no files, no processes.

launch-backend runs one MPS control daemon, with private pipe and log directories under its MPS
directory (`MpsPaths`), and keeps the state file there up to date (`MpsState`: up or not, and
why).  gem-schd follows the state file (partitions hold tokens side by side while MPS is up, and
are time-sliced at their size while it is not); launch-command reads it to give a partition's
client its MPS environment (`client_env`), or to say plainly that the client runs time-sliced.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from gemini.core.config import ClientSpec

CONTROL = "nvidia-cuda-mps-control"
MIB = 1 << 20
PIPE_ENV = "CUDA_MPS_PIPE_DIRECTORY"
LOG_ENV = "CUDA_MPS_LOG_DIRECTORY"
THREADS_ENV = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
MEMORY_ENV = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
MPS_ENV = (PIPE_ENV, LOG_ENV, THREADS_ENV, MEMORY_ENV)
# MPS renumbers the GPUs it sees: the control daemon must see them all, as nvidia-smi numbers them
# (the config's gpu=G), and each client picks its own with CUDA_VISIBLE_DEVICES.
HIDDEN_FROM_CONTROL = ("CUDA_VISIBLE_DEVICES",)


def default_dir(tmp: str, uid: int, port: int) -> str:
    """launch-backend's MPS directory unless told otherwise: per user and per backend (its
    first scheduler's port), so launch-command --backend-port finds the same one."""
    return os.path.join(tmp, f"gemini-mps-{uid}-{port}")


@dataclass(frozen=True)
class MpsPaths:
    """Where one launch-backend's MPS lives: the control daemon's pipe directory (its sockets
    and pid file), its log directory, and the state file."""

    root: str

    @property
    def pipe_dir(self) -> str:
        return os.path.join(self.root, "pipe")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.root, "log")

    @property
    def state_file(self) -> str:
        return os.path.join(self.root, "state.json")

    @property
    def pid_file(self) -> str:
        return os.path.join(self.pipe_dir, f"{CONTROL}.pid")


@dataclass(frozen=True)
class MpsState:
    """What the state file says: `spatial` while the control daemon serves; `reason` why not
    (or what happened last); `fault` while an MPS server recovers from a client's fatal error."""

    spatial: bool
    reason: str = ""
    pipe_dir: str = ""
    log_dir: str = ""
    fault: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> MpsState:
        """ValueError for anything that is not a state file."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc.msg}") from None
        if not isinstance(data, dict) or not isinstance(data.get("spatial"), bool):
            raise ValueError("not an MPS state (no 'spatial': true/false)")
        fields = {k: str(data.get(k, "")) for k in ("reason", "pipe_dir", "log_dir", "fault")}
        state = cls(data["spatial"], **fields)
        if state.spatial and not state.pipe_dir:
            raise ValueError("MPS is up but the state names no pipe directory")
        return state


# MPS's pinned limit counts the process's CUDA context, which GPU_MEM does not (README, "What
# GPU_MEM counts"): 322 MiB for a torch process under MPS on the H100 (bench/spatial.py, fence).
# Without room for it the fence refused a 2 GiB client at 1.5 GiB, before the hook's limit.
CONTEXT_ALLOWANCE_MIB = 1024


def pinned_limit(specs: Sequence[ClientSpec]) -> str:
    """CUDA_MPS_PINNED_DEVICE_MEM_LIMIT for a client whose devices 0, 1, … are `specs`' GPUs:
    each device's GPU_MEM in MiB, rounded up, plus room for the context, so that the hook's
    exact limit is met first and the fence only stops what escapes it."""
    return ",".join(f"{i}={math.ceil(s.gpu_mem / MIB) + CONTEXT_ALLOWANCE_MIB}M"
                    for i, s in enumerate(specs))


def client_env(specs: Sequence[ClientSpec], state: MpsState) -> tuple[dict[str, str], str]:
    """The MPS environment of a client's process, given its specs in the order of its devices,
    and one line saying which mode it runs in.  No partition, or MPS down: no environment
    (the process is an ordinary CUDA context, time-sliced)."""
    part = specs[0].partition if specs else None
    if part is None:
        return {}, "time-sliced (no partition)"
    if not state.spatial:
        why = state.reason or "MPS is not running"
        return {}, (f"time-sliced: partition {part.name} ({part.sm}% of the SMs) needs MPS, "
                    f"and {why}")
    env = {
        PIPE_ENV: state.pipe_dir,
        LOG_ENV: state.log_dir,
        THREADS_ENV: str(part.sm),
        MEMORY_ENV: pinned_limit(specs),
    }
    line = f"spatial: partition {part.name}, {part.sm}% of the SMs (MPS)"
    if state.fault:
        line += f"; warning: {state.fault}"
    return env, line


def server_pids(listing: str) -> list[int]:
    """The server pids of `get_server_list`'s answer (one per line)."""
    return [int(word) for word in listing.split() if word.isdigit()]


def is_fault(status: str) -> bool:
    """Whether `get_server_status PID`'s answer says the server is recovering from a fault."""
    return "FAULT" in status.upper()
