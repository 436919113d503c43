"""Issue 13 on the H100: spatial sharing through MPS beside time-slicing, through the user's own
tools (launch-backend, launch-command --config).

  python3 bench/spatial.py [--seconds 15] [--out bench/results] [--only CASE,...] [--k 8] [--cpu]

Workloads: bench/spatial_app.py.  Each case runs the same clients twice, one run after the
other: time-sliced (a config without partitions: gemini's tokens, as before) and spatial (the
same clients in partitions: launch-backend starts MPS, launch-command gives each its share of
the SMs).  A rate's reference is the same program alone and bare (no hook, no MPS), measured
before and after the cases (their mean).
  small_pair       two small matmul loops (512² bf16: most SMs idle): time-sliced 0.5/0.5,
                   spatial 50 %/50 %.  aggregate = Σ rates ÷ the solo rate; goal spatial ≥ 1.7
  saturating_pair  two 4096² matmul loops: time-sliced 0.3/0.7, spatial 30 %/70 %.  split:
                   each rate ÷ solo against its target; goal within 2 pp, aggregate ≥ 0.97
  latency          an inference client (6-layer MLP, batch 1-8 at random, a request every
                   5 ms) beside a training loop: its p99 alone (bare), time-sliced (0.5/0.5) and
                   spatial (inference 30 %, training 70 %); goal spatial ≤ 1.5 × alone
  fault            under MPS: a matmul loop, then beside it a client whose kernel writes to an
                   illegal address.  Records what the neighbour saw (its error, when, whether
                   CUDA still worked for it), what launch-backend noticed, and whether a new
                   client is served afterwards.
  fence            MPS's pinned device-memory limit (the second fence launch-command sets):
                   a process under the MPS server without the hook asks for 3 GiB, without and
                   with CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M; then a client with GPU_MEM
                   2 GiB through launch-command (hook and fence).  MiB each got, and the error.
Writes <out>/<gpu>-<date>-spatial.{json,md}.  --cpu: a dry run of the plumbing without a GPU
(stand-in nvidia-cuda-mps-control and nvidia-smi; the apps sleep instead of computing).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from common import gpu_name

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
APP = str(ROOT / "bench" / "spatial_app.py")
sys.path.insert(0, str(ROOT))

SMALL, BIG = 512, 4096
CASES = ("small_pair", "saturating_pair", "latency", "fault", "fence")
GOALS = {"small_pair_aggregate": 1.7, "split_pp": 2.0, "saturating_aggregate": 0.97,
         "latency_ratio": 1.5}
CONFIGS = {
    ("small_pair", "time_sliced"): "2\ns1 0.5 1.0 8GiB\ns2 0.5 1.0 8GiB\n",
    ("small_pair", "spatial"): "2\ns1 1 1 8GiB sm=50\ns2 1 1 8GiB sm=50\n",
    ("saturating_pair", "time_sliced"): "2\na 0.3 1.0 16GiB\nb 0.7 1.0 16GiB\n",
    ("saturating_pair", "spatial"): "2\na 1 1 16GiB sm=30\nb 1 1 16GiB sm=70\n",
    ("latency", "time_sliced"): "2\ninfer 0.5 1.0 8GiB\ntrain 0.5 1.0 16GiB\n",
    ("latency", "spatial"): "2\ninfer 1 1 8GiB sm=30\ntrain 1 1 16GiB sm=70\n",
    ("fault", "spatial"): "2\nvictim 1 1 16GiB sm=50\nfaulter 1 1 1GiB sm=50\n",
    ("fence", "spatial"): "1\nfenced 1 1 2GiB sm=50\n",
}
TARGETS = {"a": 0.3, "b": 0.7}

# --cpu: the same file-based stand-in the tests use (tests/integration/test_mps_launch.py).
STANDIN_CONTROL = f"""#!{PY}
import os, sys
pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/nonexistent")
up = os.path.join(pipe, "standin-up")
if sys.argv[1:] == ["-d"]:
    open(up, "w").close()
    sys.exit(0)
command = sys.stdin.read().strip()
if not os.path.exists(up):
    print("Cannot find MPS control daemon process")
    sys.exit(1)
if command == "quit":
    os.unlink(up)
elif command.startswith("get_server_status"):
    print("ACTIVE")
"""
STANDIN_SMI = f"#!{PY}\nprint('0, GPU-00000000-dry-run')\n"


def log(*parts: object) -> None:
    print(*parts, flush=True)


class Run:
    """Process environments: ROOT on PYTHONPATH, nothing of an outer gemini client; with
    --cpu, the stand-ins first on PATH."""

    def __init__(self, cpu: bool, seconds: float, k: int = 8) -> None:
        self.cpu, self.seconds, self.k = cpu, seconds, k
        self.bin: str | None = None
        if cpu:
            self.bin = tempfile.mkdtemp(prefix="gem-spatial-bin-")
            for name, text in (("nvidia-cuda-mps-control", STANDIN_CONTROL),
                               ("nvidia-smi", STANDIN_SMI)):
                path = Path(self.bin) / name
                path.write_text(text)
                path.chmod(0o755)

    def env(self) -> dict[str, str]:
        e = dict(os.environ, PYTHONUNBUFFERED="1")
        e["PYTHONPATH"] = os.pathsep.join(p for p in (e.get("PYTHONPATH", ""), str(ROOT)) if p)
        for k in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "POD_MANAGER_PORT", "POD_NAME",
                  "CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY",
                  "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"):
            e.pop(k, None)
        if self.bin:
            e["PATH"] = f"{self.bin}:{e['PATH']}"
        return e

    def app(self, kind: str, *args: str, seconds: float | None = None) -> list[str]:
        s = self.seconds if seconds is None else seconds
        if kind == "matmul":
            args = ("--k", str(self.k), *args)
        return [PY, APP, kind, "--seconds", f"{s:g}", *args, *(["--cpu"] if self.cpu else [])]


class App:
    """One program (bare, or under launch-command); its stdout JSON lines read by a thread."""

    def __init__(self, argv: list[str], env: dict[str, str], name: str) -> None:
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT,
                                     start_new_session=True)
        self.lines: queue.Queue[dict | None] = queue.Queue()
        self.err: list[str] = []
        threading.Thread(target=self._out, daemon=True).start()
        threading.Thread(target=self._err, daemon=True).start()

    def _out(self) -> None:
        for line in self.proc.stdout:  # type: ignore[union-attr]
            if line.startswith("{"):
                try:
                    self.lines.put(json.loads(line))
                except json.JSONDecodeError:
                    continue
        self.lines.put(None)

    def _err(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.err.append(line)

    def next(self, timeout: float) -> dict:
        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.name}: nothing within {timeout:.0f} s; stderr: "
                               + "".join(self.err[-20:])) from None
        if line is None:
            raise RuntimeError(f"{self.name}: exited ({self.proc.wait()}); stderr: "
                               + "".join(self.err[-20:]))
        return line

    def ready(self, timeout: float = 180.0) -> dict:
        line = self.next(timeout)
        if "error" in line:
            raise RuntimeError(f"{self.name}: {line['error']}; stderr: " + "".join(self.err[-20:]))
        return line

    def go(self) -> None:
        self.proc.stdin.write("go\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]

    def result(self, timeout: float) -> dict:
        while "kind" not in (line := self.next(timeout)):
            continue  # progress lines
        return line

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def mode_line(self) -> str:
        return next((x.strip() for x in self.err if "launch-command:" in x and " runs " in x), "")


def together(apps: list[App], seconds: float,
             halfway: Callable[[], None] | None = None) -> list[dict]:
    """Wait until every app is warm, start them together, collect their results; `halfway`
    runs (in a thread) half-way through the run."""
    timer = threading.Timer(seconds / 2, halfway) if halfway is not None else None
    try:
        for a in apps:
            a.ready()
        for a in apps:
            a.go()
        if timer is not None:
            timer.start()
        return [a.result(seconds + 120) for a in apps]
    finally:
        if timer is not None:
            timer.cancel()
        for a in apps:
            a.stop()


class Backend:
    """launch-backend on a config, as the user runs it; its stderr kept."""

    def __init__(self, run: Run, config: str, port: int, tag: str) -> None:
        self.run, self.port = run, port
        self.dir = Path(tempfile.mkdtemp(prefix=f"gem-spatial-{tag}-"))
        self.conf = self.dir / "resource-config.txt"
        self.conf.write_text(config)
        self.mps_dir = self.dir / "mps"
        self.proc = subprocess.Popen(
            [PY, "-m", "gemini.cli.launch_backend", f"{PY} -m gemini.cli.schd",
             f"{PY} -m gemini.cli.pmgr", "--config", str(self.conf), "--port", str(port),
             "--mps-dir", str(self.mps_dir), "--mps-check", "1"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=run.env(), cwd=ROOT,
            start_new_session=True)
        self.out: list[str] = []
        self.err: list[str] = []
        threading.Thread(target=self._pump_err, daemon=True).start()
        clients = int(config.split()[0])
        for _ in range(1 + clients + ("sm=" in config)):  # scheduler, pod managers, mps line
            self.out.append(self.proc.stdout.readline().strip())  # type: ignore[union-attr]
            log("   ", self.out[-1])
        self._wait_listening(clients)

    def _pump_err(self) -> None:
        for line in self.proc.stderr:  # type: ignore[union-attr]
            self.err.append(line)

    def _wait_listening(self, clients: int, timeout: float = 60.0) -> None:
        from gemini.client import query_status

        end = time.monotonic() + timeout
        while True:
            try:
                snap = query_status("127.0.0.1", self.port, timeout=2.0)
                if len(snap["clients"]) == clients:
                    return
            except OSError:
                pass
            if time.monotonic() > end:
                raise RuntimeError("the scheduler did not answer: " + "".join(self.err[-20:]))
            time.sleep(0.2)

    def client(self, name: str, argv: list[str]) -> App:
        cmd = [PY, "-m", "gemini.cli.launch_command", "--name", name, "--config", str(self.conf),
               "--backend-port", str(self.port), "--mps-dir", str(self.mps_dir), "--", *argv]
        return App(cmd, self.run.env(), name)

    def modes(self) -> dict[str, str]:
        from gemini.client import query_status
        from gemini.core.status import mode

        snap = query_status("127.0.0.1", self.port, timeout=5.0)
        return {c["name"]: mode(c) for c in snap["clients"]}

    def stop(self) -> int:
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        return self.proc.returncode


@contextmanager
def backend(run: Run, case: str, mode: str, port: int) -> Iterator[Backend]:
    b = Backend(run, CONFIGS[(case, mode)], port, f"{case}-{mode}")
    try:
        yield b
    finally:
        b.stop()


def pair(run: Run, case: str, mode: str, port: int, argvs: dict[str, list[str]]) -> dict:
    """Two clients at once under `mode`; their results and the modes they got."""
    with backend(run, case, mode, port) as b:
        apps = [b.client(name, argv) for name, argv in argvs.items()]
        modes: dict[str, str] = {}

        def sample() -> None:  # the scheduler's view, half-way through
            try:
                modes.update(b.modes())
            except OSError as exc:
                modes["error"] = str(exc)

        results = together(apps, run.seconds, sample)
        lines = {a.name: a.mode_line() for a in apps}
    return {"results": dict(zip(argvs, results, strict=True)), "modes": modes,
            "launch_command": lines}


def raw_pair(run: Run, case: str, port: int, argvs: dict[str, list[str]]) -> dict:
    """The spatial case's clients under MPS at the same SM shares, without gemini's hook (the
    MPS server of a spatial backend, reached directly): what MPS alone gives them."""
    from gemini.core.mps import MpsPaths

    with backend(run, case, "spatial", port) as b:
        paths = MpsPaths(str(b.mps_dir))
        share = {c.split()[0]: c.split("sm=")[1].split()[0]
                 for c in CONFIGS[(case, "spatial")].splitlines()[1:]}
        apps = [App(argv, {**run.env(), "CUDA_MPS_PIPE_DIRECTORY": paths.pipe_dir,
                           "CUDA_MPS_LOG_DIRECTORY": paths.log_dir,
                           "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": share[name]}, name)
                for name, argv in argvs.items()]
        results = together(apps, run.seconds)
    return {"results": dict(zip(argvs, results, strict=True)), "modes": {}, "launch_command": {}}


def solo(run: Run, kind: str, *args: str) -> float:
    (result,) = together([App(run.app(kind, *args), run.env(), f"solo-{kind}")], run.seconds)
    return float(result["rate"])


def throughput_case(run: Run, case: str, n: int, solo_rate: float, port: int) -> dict:
    names = ["s1", "s2"] if case == "small_pair" else ["a", "b"]
    out: dict = {}
    # spatial_raw: the same partitions under MPS without the hook, to tell MPS's cost from ours.
    for i, mode in enumerate(("time_sliced", "spatial", "spatial_raw")):
        log(f"{case} / {mode}")
        argvs = {name: run.app("matmul", "--n", str(n)) for name in names}
        got = (raw_pair(run, case, port + 20 * i, argvs) if mode == "spatial_raw"
               else pair(run, case, mode, port + 20 * i, argvs))
        rates = {name: float(r.get("rate", 0.0)) for name, r in got["results"].items()}
        entry: dict = {"aggregate": round(sum(rates.values()) / solo_rate, 4),
                       "rates": {k: round(v, 2) for k, v in rates.items()},
                       "modes": got["modes"], "launch_command": got["launch_command"]}
        if case == "saturating_pair":
            entry["split"] = [{"name": name, "target": TARGETS[name],
                               "achieved": round(rates[name] / solo_rate, 4)} for name in names]
        errors = {k: r["error"] for k, r in got["results"].items() if "error" in r}
        if errors:
            entry["errors"] = errors
        out[mode] = entry
        log("   ", json.dumps({k: v for k, v in entry.items() if k != "launch_command"}))
    return out


def latency_case(run: Run, port: int) -> dict:
    infer, train = run.app("infer", "--n", "1024"), run.app("train", "--n", "4096")
    log("latency / alone")
    (alone,) = together([App(infer, run.env(), "infer-alone")], run.seconds)
    p99 = {"alone": alone["p99_ms"]}
    p50 = {"alone": alone["p50_ms"]}
    train_rate: dict[str, float] = {}
    modes = {}
    for i, mode in enumerate(("time_sliced", "spatial", "spatial_raw")):
        log(f"latency / {mode}")
        argvs = {"infer": infer, "train": train}
        got = (raw_pair(run, "latency", port + 20 * i, argvs) if mode == "spatial_raw"
               else pair(run, "latency", mode, port + 20 * i, argvs))
        p99[mode] = got["results"]["infer"]["p99_ms"]
        p50[mode] = got["results"]["infer"]["p50_ms"]
        train_rate[mode] = round(float(got["results"]["train"].get("rate", 0.0)), 3)
        modes[mode] = got["modes"]
    rounded = {k: round(v, 3) for k, v in p99.items()}
    log("   ", json.dumps(rounded))
    return {"p99_ms": rounded, "p50_ms": {k: round(v, 3) for k, v in p50.items()},
            "train_steps_per_s": train_rate, "modes": modes,
            "spatial_over_alone": round(p99["spatial"] / p99["alone"], 3)}


FENCE_ASK_MIB, FENCE_PINNED_MIB = 3072, 1024


def fence_case(run: Run, port: int) -> dict:
    """MPS's pinned-memory limit, the second fence launch-command sets: a process under the MPS
    server of a spatial backend, without the hook, asks for 3 GiB with and without
    CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=1024M; then the client `fenced` (GPU_MEM 2 GiB) through
    launch-command, hook and fence together."""
    from gemini.core.mps import MpsPaths

    log("fence / spatial")
    ask = run.app("alloc", "--mib", str(FENCE_ASK_MIB))
    out: dict = {}
    with backend(run, "fence", "spatial", port) as b:
        paths = MpsPaths(str(b.mps_dir))
        mps = {**run.env(), "CUDA_MPS_PIPE_DIRECTORY": paths.pipe_dir,
               "CUDA_MPS_LOG_DIRECTORY": paths.log_dir, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "50"}
        pinned = {**mps, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": f"0={FENCE_PINNED_MIB}M"}
        for key, env in (("mps_unfenced", mps), ("mps_pinned_1024m", pinned)):
            (out[key],) = together([App(ask, env, key)], run.seconds)
        app = b.client("fenced", ask)
        (out["gemini_2gib"],) = together([app], run.seconds)
        out["gemini_2gib"]["launch_command"] = app.mode_line()
    log("   ", json.dumps(out))
    return out


def fault_case(run: Run, port: int) -> dict:
    """A matmul loop, then a neighbour's illegal address; then a new client."""
    log("fault / spatial")
    seconds = max(run.seconds, 3.0 if run.cpu else 10.0)  # time to see what follows
    with backend(run, "fault", "spatial", port) as b:
        victim = b.client("victim", run.app("matmul", "--n", str(BIG), "--stream",
                                            seconds=seconds))
        faulter = b.client("faulter", run.app("fault"))
        try:
            victim.ready()
            faulter.ready()
            victim.go()
            progress = [victim.next(60.0) for _ in range(4)]  # about a second of work
            modes = b.modes()
            faulter.go()
            fault = faulter.result(60.0)
            lines = []
            while "kind" not in (line := victim.next(seconds + 60)):
                lines.append(line)
            victim_result = line
        finally:
            victim.stop()
            faulter.stop()
        last = lines[-1] if lines else progress[-1]
        victim_out = {
            **{k: v for k, v in victim_result.items() if k != "kind"},
            "progress_after_fault": sum(1 for x in lines if x["t"] > fault.get("t", 0)),
            "last_progress_after_fault_s": round(last["t"] - fault.get("t", last["t"]), 3),
        }
        if "error_t" in victim_result and "t" in fault:
            victim_out["error_after_fault_s"] = round(victim_result["error_t"] - fault["t"], 3)
        time.sleep(2.5)  # two of launch-backend's MPS checks (--mps-check 1)
        probes = []
        for _ in range(3):  # a new client, once the faulted ones are gone
            probe = b.client("victim", run.app("matmul", "--n", str(SMALL), seconds=2.0))
            try:
                probe.ready(120.0)
                probe.go()
                result = probe.result(60.0)
            except RuntimeError as exc:
                result = {"error": str(exc)[:500]}
            finally:
                probe.stop()
            probes.append({k: v for k, v in result.items() if k not in ("kind", "n")})
            if "error" not in result:
                break
            time.sleep(2.0)
        noticed = [x.strip() for x in b.err if "MPS" in x]
    return {"modes": modes, "faulter": fault, "neighbour": victim_out, "new_client": probes,
            "launch_backend_lines": noticed[-20:], "mps_logs": mps_logs(b.mps_dir)}


def mps_logs(mps_dir: Path) -> dict[str, list[str]]:
    out = {}
    for name in ("control.log", "server.log"):
        try:
            out[name] = (mps_dir / "log" / name).read_text(errors="replace").splitlines()[-30:]
        except OSError:
            continue
    return out


def free_base(offsets: range = range(0, 350)) -> int:
    """A base port whose base + offsets are all free just now (--port 0), below the kernel's
    ephemeral range: a port there that is free now may be taken by any outgoing connection
    (the pod managers' own) before a daemon binds it."""
    import random
    import socket

    low = 32768
    with suppress(OSError, ValueError, IndexError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    high = max(low - len(offsets), 1025)
    rng = random.Random()
    for _ in range(100):
        base = rng.randrange(min(10000, high - 1), high)
        try:
            for port in (base + o for o in offsets):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError("no free ports")


def goals(result: dict) -> dict[str, bool]:
    out = {}
    if "small_pair" in result:
        out["small_pair spatial aggregate >= 1.7"] = (
            result["small_pair"]["spatial"]["aggregate"] >= GOALS["small_pair_aggregate"])
    if "saturating_pair" in result:
        spatial = result["saturating_pair"]["spatial"]
        out["saturating split within 2 pp"] = all(
            abs(s["achieved"] - s["target"]) * 100 <= GOALS["split_pp"] for s in spatial["split"])
        out["saturating aggregate >= 0.97"] = (
            spatial["aggregate"] >= GOALS["saturating_aggregate"])
    if "latency" in result:
        out["latency spatial p99 <= 1.5x alone"] = (
            result["latency"]["spatial_over_alone"] <= GOALS["latency_ratio"])
    return out


def markdown(r: dict) -> str:
    lines = [f"# gemini, issue 13: spatial sharing (MPS) — {r['device']}", "",
             f"{r['date']} · `{r['command']}`", "",
             f"solo (bare) rates: {r['solo']}", "",
             "| case | mode | aggregate | split (achieved / target) | modes |",
             "|---|---|---|---|---|"]
    for case in ("small_pair", "saturating_pair"):
        for mode, e in r.get(case, {}).items():
            split = ", ".join(f"{s['name']} {s['achieved']:.3f}/{s['target']}"
                              for s in e.get("split", []))
            lines.append(f"| {case} | {mode} | {e['aggregate']:.3f} | {split} | "
                         f"{', '.join(f'{k}: {v}' for k, v in e['modes'].items())} |")
    if "latency" in r:
        lat = r["latency"]
        lines += ["", "| inference p99 ms | alone | time-sliced | spatial | MPS alone (no hook) "
                  "| spatial ÷ alone |", "|---|---|---|---|---|---|",
                  f"| | {lat['p99_ms']['alone']} | {lat['p99_ms']['time_sliced']} | "
                  f"{lat['p99_ms']['spatial']} | {lat['p99_ms'].get('spatial_raw', '')} | "
                  f"{lat['spatial_over_alone']} |"]
    if "fault" in r:
        f = r["fault"]
        lines += ["", "## fault", "", f"faulter: `{json.dumps(f['faulter'])}`", "",
                  f"neighbour: `{json.dumps(f['neighbour'])}`", "",
                  f"new client: `{json.dumps(f['new_client'])}`", "",
                  "launch-backend: " + " / ".join(f["launch_backend_lines"][-5:])]
    if "fence" in r:
        lines += ["", "## fence (MPS pinned device memory limit)", ""]
        lines += [f"- {k}: {v.get('allocated_mib')} of {v.get('asked_mib')} MiB, "
                  f"{v.get('error') or 'no error'}" for k, v in r["fence"].items()
                  if isinstance(v, dict)]
    lines += ["", "goals: " + ", ".join(f"{k}: {'yes' if v else 'NO'}"
                                        for k, v in r["goals"].items())]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=15.0, help="each measured run (15)")
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--only", default=",".join(CASES), help=f"cases, of {','.join(CASES)}")
    p.add_argument("--port", type=int, default=53000,
                   help="first launch-backend port; the cases use up to 350 above it (0: any "
                   "free ones)")
    p.add_argument("--k", type=int, default=8,
                   help="matmul loops: steps between synchronisations (8); more, fewer gaps")
    p.add_argument("--cpu", action="store_true", help="dry run without a GPU")
    args = p.parse_args()
    cases = args.only.split(",")
    unknown = set(cases) - set(CASES)
    if unknown:
        p.error(f"unknown case(s) {', '.join(sorted(unknown))}")
    run = Run(args.cpu, args.seconds, args.k)
    t0 = time.time()
    result: dict = {"device": "cpu dry run" if args.cpu else gpu_name(),
                    "date": time.strftime("%Y-%m-%d %H:%M:%S"),
                    "command": " ".join(["python3", "bench/spatial.py", *sys.argv[1:]]),
                    "seconds": args.seconds, "k": args.k}
    solos: dict[str, list[float]] = {"small": [], "saturating": []}

    def measure_solos() -> None:
        if "small_pair" in cases:
            solos["small"].append(solo(run, "matmul", "--n", str(SMALL)))
        if "saturating_pair" in cases:
            solos["saturating"].append(solo(run, "matmul", "--n", str(BIG)))
        log("solo", json.dumps(solos))

    measure_solos()
    port = args.port or free_base()
    if "small_pair" in cases:
        result["small_pair"] = throughput_case(run, "small_pair", SMALL, solos["small"][0], port)
    if "saturating_pair" in cases:
        result["saturating_pair"] = throughput_case(run, "saturating_pair", BIG,
                                                    solos["saturating"][0], port + 100)
    if "latency" in cases:
        result["latency"] = latency_case(run, port + 200)
    if "fault" in cases:
        result["fault"] = fault_case(run, port + 300)
    if "fence" in cases:
        result["fence"] = fence_case(run, port + 320)
    measure_solos()
    result["solo"] = {k: [round(x, 2) for x in v] for k, v in solos.items() if v}
    # Aggregates against the mean of the solo runs before and after.
    for case, key in (("small_pair", "small"), ("saturating_pair", "saturating")):
        if case in result and len(solos[key]) == 2:
            first, mean = solos[key][0], sum(solos[key]) / 2
            for entry in result[case].values():
                entry["aggregate"] = round(entry["aggregate"] * first / mean, 4)
                for s in entry.get("split", []):
                    s["achieved"] = round(s["achieved"] * first / mean, 4)
    result["goals"] = goals(result)
    result["total_s"] = round(time.time() - t0, 1)
    slug = result["device"].split(",")[0].strip().lower().replace(" ", "-").replace("nvidia-", "")
    stem = Path(args.out) / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}-spatial"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    log(markdown(result))
    log(f"wrote {stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
