"""Shared pieces of the benchmarks: paths, the gemini daemons as subprocesses, apps under the hook,
tenants, deadlines and the share arithmetic.  Imports from gemini only what needs neither cffi nor
watchdog (gemini.native's paths, gemini.client); the daemons run as their own processes."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import math
import os
import queue
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
BUILD = Path(os.environ.get("GEMINI_BENCH_BUILD", BENCH / ".build"))
GIB = 1 << 30
PY = sys.executable

# The launchers' defaults (tools/launch-backend.py): base quota 300 ms, minimum 20 ms, window 10 s.
DEFAULT_TIMING = {"quota_ms": 300.0, "min_quota_ms": 20.0, "window_ms": 10000.0}


class ScenarioTimeout(Exception):
    pass


# ---- environment ---------------------------------------------------------------------------------

def base_env() -> dict[str, str]:
    env = dict(os.environ)
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if str(ROOT) not in parts:
        parts.append(str(ROOT))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    env["PYTHONUNBUFFERED"] = "1"
    for k in ("LD_PRELOAD", "POD_NAME", "POD_MANAGER_PORT", "GEMINI_HOOK_DISABLE",
              "GEMINI_HOOK_STATS", "PYTORCH_CUDA_ALLOC_CONF"):
        env.pop(k, None)
    return env


HOOK_SOURCES = ("csrc/hook", "csrc/common", "csrc/include")


def hook_sources_digest(root: Path = ROOT) -> str:
    """SHA-256 (first 12 hex digits) over the hook's sources, each file's path and bytes: names
    the hook a results file was measured with where the device's copy of the tree has no git
    (an A/B swaps `csrc/` between runs).  `git archive COMMIT csrc | tar -x` of a commit gives
    the same digest."""
    h = hashlib.sha256()
    for top in HOOK_SOURCES:
        for f in sorted((root / top).rglob("*")):
            if f.is_file():
                h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def library_id(lib: Path) -> str:
    st = lib.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


def hook_path() -> Path:
    """GEMINI_BENCH_HOOK; else the hook bench/paths.py's build_hook built into BUILD, where its
    stamp says it was built from these very sources and is still that library; else the
    package's (`make build`).  (bench/pair_fake.py took one built in BUILD hours before, from
    sources without the hook's newest change: 2026-12-06.)"""
    if os.environ.get("GEMINI_BENCH_HOOK"):
        return Path(os.environ["GEMINI_BENCH_HOOK"])
    built, stamp = BUILD / "libgemhook.so.1", BUILD / "libgemhook.so.1.stamp"
    if built.exists() and stamp.exists():
        words = stamp.read_text().split()
        if words[:1] == [hook_sources_digest()] and words[-1:] == [library_id(built)]:
            return built
    from gemini.native import hook_library_path

    return hook_library_path()


def gpu_info() -> dict[str, str] | None:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return None
    try:
        out = subprocess.run([smi, "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if out.returncode != 0 or not out.stdout.strip():
        return None
    name, driver, mem = (s.strip() for s in out.stdout.splitlines()[0].split(",")[:3])
    return {"name": name, "driver": driver, "memory": mem}


def gpu_name() -> str:
    """"NAME, DRIVER" of the first GPU, for a result's "device" ("no GPU" without one)."""
    info = gpu_info()
    return f"{info['name']}, {info['driver']}" if info else "no GPU"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower().replace("nvidia", "")).strip("-") or "gpu"


def print_and_write(out: dict, out_dir: Path | None, kind: str) -> None:
    """Print a small tool's result (JSON) and, with --out, write it to
    OUT_DIR/<gpu>-<YYYYMMDD-HHMMSS>-<kind>.json (out["device"] names the GPU)."""
    text = json.dumps(out, indent=1)
    print(text)
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%d-%H%M%S")
        (out_dir / f"{slug(out['device'].split(',')[0])}-{stamp}-{kind}.json").write_text(
            text + "\n")


# ---- deadlines -----------------------------------------------------------------------------------

class Deadline:
    """SIGALRM-based time limit for one scenario (main thread only)."""

    def __init__(self, seconds: float, what: str) -> None:
        self.seconds, self.what = max(1.0, seconds), what

    def __enter__(self) -> Deadline:
        def fire(signum: int, frame: object) -> None:
            raise ScenarioTimeout(f"{self.what}: over its {self.seconds:.0f} s limit")

        self._old = signal.signal(signal.SIGALRM, fire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc: object) -> None:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, self._old)


# ---- processes -----------------------------------------------------------------------------------

@dataclass
class Proc:
    """A child in its own session; stderr pumped into a queue and kept."""

    proc: subprocess.Popen[str]
    name: str
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    err: list[str] = field(default_factory=list)
    port: int = 0

    def wait_for(self, pattern: str, timeout: float) -> re.Match[str]:
        regex = re.compile(pattern)
        for line in self.err:
            if m := regex.search(line):
                return m
        end = time.monotonic() + timeout
        while True:
            left = end - time.monotonic()
            if left <= 0 or (self.proc.poll() is not None and self.lines.empty()):
                raise RuntimeError(f"{self.name}: no line matching {pattern!r}; stderr:\n"
                                   + "".join(self.err[-30:]))
            try:
                line = self.lines.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            self.err.append(line)
            if m := regex.search(line):
                return m

    def drain(self) -> str:
        while not self.lines.empty():
            self.err.append(self.lines.get_nowait())
        return "".join(self.err)

    def stop(self, sig: int = signal.SIGTERM, wait: float = 5.0) -> int | None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(wait)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


class Procs:
    """Every child a scenario starts; all stopped (by their own process-group ids) on exit."""

    def __init__(self) -> None:
        self.all: list[Proc] = []

    def spawn(self, argv: Sequence[str], env: dict[str, str], name: str, *,
              stdin: bool = False, cwd: Path = ROOT) -> Proc:
        p = subprocess.Popen(list(argv), env=env, cwd=cwd, text=True, start_new_session=True,
                             stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = Proc(p, name)

        def pump() -> None:
            assert p.stderr is not None
            for line in p.stderr:
                proc.lines.put(line)

        threading.Thread(target=pump, daemon=True).start()
        self.all.append(proc)
        return proc

    def __enter__(self) -> Procs:
        return self

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.all):
            p.stop()


def run_app(procs: Procs, argv: Sequence[str], env: dict[str, str], name: str,
            timeout: float) -> dict:
    """Run a program to its end: its last JSON stdout line (all of them in "json_lines" when
    there are several), plus rc and, on failure, the stderr tail."""
    p = procs.spawn(argv, env, name)
    try:
        out, _ = p.proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.stop(signal.SIGKILL)
        out = p.proc.stdout.read() if p.proc.stdout else ""
        return {"error": f"timed out after {timeout:.0f} s", "stderr": p.drain()[-1500:]}
    parsed = []
    for line in (out or "").splitlines():
        if line.strip().startswith("{"):
            try:
                parsed.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    result: dict = dict(parsed[-1]) if parsed else {}
    if len(parsed) > 1:
        result["json_lines"] = parsed
    result.setdefault("rc", p.proc.returncode)
    if p.proc.returncode != 0 or not result or "error" in result:
        result["stderr"] = p.drain()[-1500:]
    return result


def kernels(procs: Procs, argv: list[str], env: dict[str, str], name: str) -> int:
    """The kernels the fake GPU's test client launched, from its last JSON line (run_app)."""
    result = run_app(procs, argv, env, name, timeout=120)
    if result.get("rc") != 0 or "kernels" not in result:
        raise RuntimeError(f"{name} failed: {result}")
    return int(result["kernels"])


# ---- the gemini daemons --------------------------------------------------------------------------

@dataclass
class Client:
    name: str
    request: float
    limit: float
    mem: int = 4 * GIB


def promised_shares(clients: Iterable[Client]) -> dict[str, float]:
    """What gem-schd promises saturating clients: each its request, and what the requests leave
    shared as evenly as the limits allow (0.4/0.5 uncapped: 0.5 each)."""
    from gemini.core.policy import targets

    shares = targets({c.name: (c.request, c.limit) for c in clients})
    return {n: round(x, 4) for n, x in shares.items()}  # (found by bisection: 0.69999...)


class Backend:
    """gem-schd + one gem-pmgr per client, as subprocesses on port 0 (the log line names the
    port).  `hook_env(name)` is what an application needs to run under the hook as that client."""

    def __init__(self, procs: Procs, clients: Iterable[Client], timing: dict | None = None,
                 tag: str = "", daemon_env: dict[str, str] | None = None,
                 verbose: bool = False) -> None:
        self.procs = procs
        self.clients = list(clients)
        t = {**DEFAULT_TIMING, **(timing or {})}
        self.dir = Path(tempfile.mkdtemp(prefix=f"gembench-{tag}-"))
        cfg = self.config = self.dir / "resource-config.txt"
        self.write_config(self.clients)
        env = {**base_env(), **(daemon_env or {})}
        v = ["-v"] if verbose else []  # debug lines, with CLOCK_MONOTONIC stamps
        flags = ["-q", f"{t['quota_ms']:g}", "-m", f"{t['min_quota_ms']:g}",
                 "-w", f"{t['window_ms']:g}", *v]
        if "grace_ms" in t:
            flags += ["--grace", f"{t['grace_ms']:g}"]
        if "max_quota_ms" in t:
            flags += ["--max_quota", f"{t['max_quota_ms']:g}"]
        if "short_window_ms" in t:
            flags += ["--short-window", f"{t['short_window_ms']:g}"]
        if t.get("no_clock"):
            flags += ["--no-clock"]
        if t.get("shared_speed") is False:  # (on by default since 2026-12-06)
            flags += ["--no-shared-speed"]
        if t.get("hand_over_at_arrival") is False:  # (on by default)
            flags += ["--no-hand-over-at-arrival"]
        if t.get("lone_turns") is False:  # (on by default since 2026-12-07)
            flags += ["--no-lone-turns"]
        if t.get("shared_turns") is False:  # (on by default since 2026-12-07, with lone turns)
            flags += ["--no-shared-turns"]
        # GEMINI_BENCH_DAEMON_PREFIX: a command the daemons run under (`taskset -c 12-15`,
        # `nice -n -5`), to tell what the host's scheduling of them costs the clients.
        pre = shlex.split(os.environ.get("GEMINI_BENCH_DAEMON_PREFIX", ""))
        self.schd = procs.spawn([*pre, PY, "-m", "gemini.cli.schd", "-P", "0", "-p", str(self.dir),
                                 "-f", cfg.name, *flags], env, "gem-schd")
        self.schd.port = int(self.schd.wait_for(r"listening on [\d.]+:(\d+)", 30).group(1))
        self.pmgrs: dict[str, Proc] = {}
        for c in self.clients:
            penv = {**env, "POD_NAME": c.name, "SCHEDULER_PORT": str(self.schd.port),
                    "SCHEDULER_IP": "127.0.0.1"}
            pm = procs.spawn([*pre, PY, "-m", "gemini.cli.pmgr", "--port", "0", *v], penv,
                             f"pmgr-{c.name}")
            pm.port = int(pm.wait_for(r"listening on [\d.]+:(\d+)", 30).group(1))
            self.pmgrs[c.name] = pm
        for pm in self.pmgrs.values():
            pm.wait_for("memory limit", 30)

    def write_config(self, clients: Iterable[Client]) -> None:
        """The config file (gem-schd applies an edit while it runs): written beside and renamed
        over it, so the scheduler never reads half a file."""
        clients = list(clients)
        tmp = self.config.with_suffix(".new")
        tmp.write_text(f"{len(clients)}\n" + "".join(
            f"{c.name} {c.request:g} {c.limit:g} {c.mem}\n" for c in clients))
        os.replace(tmp, self.config)

    def hook_env(self, name: str, stats: Path | None = None) -> dict[str, str]:
        env = {"LD_PRELOAD": str(hook_path()), "POD_NAME": name,
               "POD_MANAGER_IP": "127.0.0.1", "POD_MANAGER_PORT": str(self.pmgrs[name].port)}
        if stats is not None:
            env["GEMINI_HOOK_STATS"] = str(stats)
        return env

    def stop(self) -> None:
        for pm in self.pmgrs.values():
            pm.stop()
        self.schd.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def read_stats(path: Path) -> dict[str, int]:
    try:
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    except (OSError, ValueError):
        return {}


def launch_counts(stats: dict[str, int]) -> dict[str, int]:
    kern = sum(v for k, v in stats.items() if k.startswith("cuLaunch"))
    graph = sum(v for k, v in stats.items() if k.startswith("cuGraphLaunch"))
    return {"kernel_launches": kern, "graph_launches": graph}


# ---- tenants -------------------------------------------------------------------------------------

class Tenant:
    def __init__(self, procs: Procs, name: str, env: dict[str, str], tenant_args: Sequence[str]):
        self.name = name
        self.p = procs.spawn([PY, str(BENCH / "tenant.py"), *tenant_args], env, f"tenant-{name}",
                             stdin=True)
        self.ready: dict = {}

    def wait_ready(self, timeout: float) -> dict:
        q: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: q.put(self.p.proc.stdout.readline()), daemon=True).start()
        try:
            line = q.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"tenant {self.name} not ready after {timeout:.0f} s: "
                               + self.p.drain()[-1500:]) from None
        if not line:
            raise RuntimeError(f"tenant {self.name} died: " + self.p.drain()[-1500:])
        self.ready = json.loads(line)
        return self.ready

    def go(self, start: float, end: float) -> None:
        assert self.p.proc.stdin is not None
        self.p.proc.stdin.write(f"go {start:.6f} {end:.6f}\n")
        self.p.proc.stdin.flush()

    def result(self, timeout: float) -> dict:
        try:
            out, _ = self.p.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.stop(signal.SIGKILL)
            raise RuntimeError(f"tenant {self.name} did not finish: "
                               + self.p.drain()[-1500:]) from None
        lines = [x for x in out.splitlines() if x.startswith("{")]
        if not lines:
            raise RuntimeError(f"tenant {self.name} printed nothing: " + self.p.drain()[-1500:])
        return json.loads(lines[-1])


def tenant_args(kind: str, iters: int = 0, calibrate_ms: float = 0.0,
                backend: str = "auto") -> list[str]:
    if kind == "fake":
        from gemini.native import program_path

        return ["--backend", "fake", "--gem-client", str(program_path("gem_client")),
                "--fake-kernel-ms", "1.5"]
    args = ["--backend", backend]
    if iters:
        args += ["--iters", str(iters)]
    if calibrate_ms:
        args += ["--calibrate-ms", str(calibrate_ms)]
    return args


def fake_env(gpu_name: str) -> dict[str, str]:
    from gemini.native import fake_driver_dir

    return {"LD_LIBRARY_PATH": f"{fake_driver_dir()}:{os.environ.get('LD_LIBRARY_PATH', '')}",
            "GEMINI_FAKE_GPU": gpu_name}


@contextlib.contextmanager
def fake_gpu_segment() -> Iterator[str]:
    """A fake GPU of this run's own (its shared-memory segment's name, GEMINI_FAKE_GPU), gone
    afterwards: two bench runs at once do not share one timeline, and none is left behind."""
    name = f"/gembench-{os.getpid()}"
    try:
        yield name
    finally:
        Path("/dev/shm", name.lstrip("/")).unlink(missing_ok=True)


def fake_work_app(seconds: float, gpu: str) -> tuple[list[str], dict[str, str]]:
    """The fake GPU's test client as bench/cap_fake.py and bench/pair_fake.py run it (0.2 ms
    kernels in bursts of 25, a sync after each, for `seconds`), and its environment on the
    fake GPU `gpu` (fake_gpu_segment)."""
    from gemini.native import program_path

    app = [str(program_path("gem_client")), "work", "--kernel-ms", "0.2", "--burst", "25",
           "--sync", "ctx", "--seconds", f"{seconds:g}"]
    return app, {**base_env(), **fake_env(gpu)}


# ---- share arithmetic ----------------------------------------------------------------------------

def count_at(samples: list[list[float]], t: float) -> float:
    """Kernels completed by time t (step function over the tenant's samples)."""
    lo, hi, best = 0, len(samples) - 1, 0.0
    while lo <= hi:
        mid = (lo + hi) // 2
        if samples[mid][0] <= t:
            best = samples[mid][1]
            lo = mid + 1
        else:
            hi = mid - 1
    return best


def rate(samples: list[list[float]], a: float, b: float) -> float:
    return (count_at(samples, b) - count_at(samples, a)) / (b - a) if b > a else 0.0


def windows(a: float, b: float, width: float) -> list[tuple[float, float]]:
    out, t = [], a
    while t + width <= b + 1e-9:
        out.append((t, t + width))
        t += width
    return out


def pct(values: Sequence[float], q: float) -> float:
    """The nearest-rank q-quantile: the smallest value with at least q of them at or below it
    (until 2026-12-05 one rank higher where q * n is whole: p99 of 100 was their largest)."""
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, max(math.ceil(q * len(s) - 1e-9) - 1, 0))]


# ---- token grants, from the scheduler's status -------------------------------------------------

class ClockSampler:
    """The GPU's SM clock and power draw every `period_ms` (nvidia-smi -lms) in a thread, on this
    machine's CLOCK_MONOTONIC.  Why: a GPU's clock is shared and set by its power limit, so the
    work a program does per second of GPU time moves with what ran beside it (and with the time
    the GPU idled).  Does nothing where nvidia-smi is missing."""

    def __init__(self, period_ms: int = 100) -> None:
        self.period_ms = period_ms
        self.samples: list[tuple[float, float, float]] = []  # (t, MHz, W)
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        smi = shutil.which("nvidia-smi")
        if smi is None or self.proc is not None:
            return
        self.proc = subprocess.Popen(
            [smi, "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
             f"-lms={self.period_ms}"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True)
        threading.Thread(target=self._read, daemon=True).start()
        atexit.register(self.stop)

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                mhz, watts = (float(x) for x in line.split(",")[:2])
            except ValueError:
                continue
            self.samples.append((time.monotonic(), mhz, watts))

    def over(self, a: float, b: float) -> dict:
        """Median SM clock and power draw over [a, b] ({} without samples there)."""
        inside = [(m, w) for t, m, w in list(self.samples) if a <= t <= b]
        if not inside:
            return {}
        return {"sm_mhz": statistics.median(m for m, _ in inside),
                "power_w": round(statistics.median(w for _, w in inside), 1)}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(5)


class GrantTracer:
    """Polls the scheduler's STATUS (every `period` s) in a thread and keeps every grant interval
    it reports, converted to this machine's CLOCK_MONOTONIC (offset = poll midpoint - uptime),
    and each client's speed charge so far at each poll (`speed_charged`)."""

    def __init__(self, port: int, period: float = 0.2) -> None:
        self.port, self.period = port, period
        self._raw: dict[tuple[str, float], float] = {}
        self._offsets: list[float] = []
        self._charges: list[tuple[float, dict[str, float]]] = []  # (poll midpoint, name: s)
        self._stop = threading.Event()
        self.error = ""
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from gemini.client import query_status

        while not self._stop.is_set():
            try:
                a = time.monotonic()
                snap = query_status("127.0.0.1", self.port, timeout=2.0)
                b = time.monotonic()
                self._offsets.append((a + b) / 2 - float(snap["uptime_s"]))
                self._charges.append(((a + b) / 2, {
                    str(c["name"]): float(c.get("speed_charge_s") or 0.0)
                    for c in snap.get("clients", [])}))
                for name, start, end in snap.get("history", []):
                    self._raw[(str(name), round(float(start), 6))] = float(end)
            except Exception as exc:  # a missed poll only loses detail
                self.error = str(exc)[:200]
            self._stop.wait(self.period)

    def speed_charged(self, name: str, a: float, b: float) -> float | None:
        """The speed charge `name` was charged between the first poll at or after `a` and the
        last at or before `b`, scaled to [a, b] (None: fewer than two polls there)."""
        inside = [(t, c[name]) for t, c in self._charges if a <= t <= b and name in c]
        if len(inside) < 2:  # (polls come one after another: their times differ)
            return None
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) * (b - a) / (t1 - t0)

    def stop(self) -> list[tuple[str, float, float]]:
        self._stop.set()
        self._thread.join(5)
        if not self._offsets:
            return []
        off = sorted(self._offsets)[len(self._offsets) // 2]
        return sorted(((n, s + off, e + off) for (n, s), e in self._raw.items()),
                      key=lambda i: i[1])


def grant_stats(grants: list[tuple[str, float, float]], samples: dict[str, list[list[float]]],
                a: float, b: float, slack: float = 0.002) -> dict[str, dict]:
    """Per client, over [a, b]: number and length of grants, and the fraction of its kernels that
    completed outside its own grants (work run on time not granted to it: overuse)."""
    import bisect

    out: dict[str, dict] = {}
    for name, smp in samples.items():
        mine = [(s, e) for n, s, e in grants if n == name and e >= a and s <= b]
        lengths = [(e - s) * 1000 for s, e in mine]
        starts = [s for s, _ in mine]
        outside = total = 0
        prev = None
        for t, k in smp:
            if t < a or t > b:
                prev = k
                continue
            done = k - (prev if prev is not None else k)
            prev = k
            total += done
            i = bisect.bisect_right(starts, t) - 1
            if i < 0 or t > mine[i][1] + slack:
                outside += done
        out[name] = {"grants": len(mine),
                     "grant_ms_mean": round(sum(lengths) / len(lengths), 1) if lengths else 0.0,
                     "grant_ms_max": round(max(lengths), 1) if lengths else 0.0,
                     "kernels_outside_grants": round(outside / total, 4) if total else 0.0}
    return out
