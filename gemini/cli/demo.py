"""`make run`: the scheduler and pod managers from resource-config.txt, plus a busy demo program
for each of the first two clients, under the hook; their shares shown live until Ctrl-C.

On a machine with an NVIDIA GPU, and PyTorch or CuPy beside gemini, the demo programs are matrix
loops on it; on any other machine they run on the fake CUDA driver's simulated GPU (the banner
says why).  Edit resource-config.txt while it
runs and watch the shares follow.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from gemini.cli._args import finite, port
from gemini.core.config import ConfigError, ResourceConfig
from gemini.core.status import render
from gemini.daemon.watcher import read_config
from gemini.native import fake_driver_dir, hook_library_path, program_path
from gemini.secret import create_secret_file, load_secret

GPU_WORKLOAD = """
import time
try:
    import torch
    a = torch.randn(4096, 4096, device="cuda")
    step = lambda: (a @ a).sum().item()
except ImportError:
    import cupy
    a = cupy.random.rand(4096, 4096, dtype=cupy.float32)
    step = lambda: float((a @ a).sum())
while True:
    step()
"""


def real_gpu_present() -> str | None:
    """None where the demo can run on a real GPU, else why it runs on the simulated one."""
    smi = shutil.which("nvidia-smi")
    if os.environ.get("GEMINI_DEMO_FAKE") == "1":
        return "GEMINI_DEMO_FAKE=1"
    if smi is None or subprocess.run([smi, "-L"], capture_output=True).returncode != 0:
        return "no GPU found by nvidia-smi"
    if not any(importlib.util.find_spec(m) for m in ("torch", "cupy")):
        # (the demo's programs need one; without, both died at once and the shares read 0)
        return f"a GPU, but neither torch nor cupy in {sys.executable}"
    return None


def workload(real_gpu: bool) -> tuple[list[str], dict[str, str]]:
    if real_gpu:
        return [sys.executable, "-c", GPU_WORKLOAD], {}
    argv = [str(program_path("gem_client")), "work", "--kernel-ms", "5", "--burst", "4",
            "--seconds", "100000"]
    env = {
        "LD_LIBRARY_PATH": f"{fake_driver_dir()}:{os.environ.get('LD_LIBRARY_PATH', '')}",
        "GEMINI_FAKE_GPU": f"/gemini-demo-{os.getuid()}",
    }
    return argv, env


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    out = log.open("ab")
    return subprocess.Popen(argv, env={**os.environ, **env}, stdout=out, stderr=out,
                            start_new_session=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="gemini demo", description=__doc__)
    p.add_argument("--config", type=Path, default=Path("resource-config.txt"))
    p.add_argument("--port", type=port, default=50051)
    p.add_argument("--seconds", type=finite, default=0, help="stop after this long (0: Ctrl-C)")
    p.add_argument("--logs", type=Path, default=Path("demo-logs"))
    args = p.parse_args(argv)
    try:
        config: ResourceConfig = read_config(args.config)
    except ConfigError as exc:
        print(f"gemini demo: {exc}", file=sys.stderr)
        return 2
    why_simulated = real_gpu_present()
    real = why_simulated is None
    args.logs.mkdir(exist_ok=True)
    # A shared secret, as a cluster should run it: only programs that can read it get tokens.
    secret_file = (args.logs / "secret").resolve()
    create_secret_file(secret_file, force=True)
    where = "the real GPU" if real else f"the simulated GPU (fake driver: {why_simulated})"
    print(f"gemini demo on {where}; config {args.config} (edit it live); logs in {args.logs}/; "
          "Ctrl-C stops.")
    py = sys.executable
    procs = [start([py, "-m", "gemini.cli.launch_backend", f"{py} -m gemini.cli.schd",
                    f"{py} -m gemini.cli.pmgr", "--config", str(args.config),
                    "--port", str(args.port), "--secret-file", str(secret_file)], {},
                   args.logs / "backend.log")]
    work_argv, work_env = workload(real)
    for index, client in enumerate(config.clients[:2], start=1):
        hook_env = {
            **work_env,
            "POD_NAME": client.name,
            "POD_MANAGER_IP": "127.0.0.1",
            "POD_MANAGER_PORT": str(args.port + index),
            "LD_PRELOAD": str(hook_library_path()),
            "GEMINI_SECRET_FILE": str(secret_file),
        }
        procs.append(start(work_argv, hook_env, args.logs / f"{client.name}.log"))
    try:
        programs = {c.name: proc for c, proc in zip(config.clients[:2], procs[1:], strict=True)}
        return watch(args.port, args.seconds, load_secret(secret_file), procs[0], programs,
                     args.logs)
    except KeyboardInterrupt:
        return 0
    finally:
        for proc in reversed(procs):
            stop(proc)
        segment = work_env.get("GEMINI_FAKE_GPU")
        if segment:  # the simulated GPU's shared memory, 250 KB of /dev/shm kept otherwise
            Path("/dev/shm", segment.lstrip("/")).unlink(missing_ok=True)


def last_lines(log: Path, n: int = 1, errors_only: bool = False) -> str:
    """The log's last `n` lines (`errors_only`: of those that say something failed: the
    daemons' lines interleave, and the reason is seldom the very last)."""
    try:
        lines = log.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    if errors_only:
        lines = [line for line in lines if " ERROR " in line or ": cannot " in line] or lines
    return " | ".join(lines[-n:])


def watch(port: int, seconds: float, secret: bytes, backend: subprocess.Popen[bytes],
          programs: dict[str, subprocess.Popen[bytes]], logs: Path) -> int:
    """The shares until Ctrl-C (or `seconds`); a program that died is said with its log's last
    line, and the backend's death ends the demo."""
    from gemini.client import query_status

    end = time.monotonic() + seconds if seconds else None
    while end is None or time.monotonic() < end:
        time.sleep(1.0)  # the refresh period of the display
        if backend.poll() is not None:
            print(f"gemini demo: launch-backend exited ({backend.returncode}): "
                  f"{last_lines(logs / 'backend.log', 3, errors_only=True)}", file=sys.stderr)
            return 1
        try:
            text = render(query_status("127.0.0.1", port, secret=secret), with_bars=True)
        except OSError as exc:
            text = f"waiting for the scheduler on port {port}: {exc}"
        for name, proc in programs.items():
            if proc.poll() is not None:
                text += (f"\n{name}'s program exited ({proc.returncode}): "
                         f"{last_lines(logs / f'{name}.log')}")
        sys.stdout.write("\x1b[H\x1b[2J" + time.strftime("%T  gemini demo\n") + text + "\n")
        sys.stdout.flush()
    return 0


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, 15)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()


if __name__ == "__main__":
    sys.exit(main())
