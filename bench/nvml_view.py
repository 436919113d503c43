"""Issue 15, item 1 on the GPU: inside a client limited to 4 GiB, NVML (pynvml, nvidia-smi)
must agree with torch.cuda.mem_get_info and list the client's processes only — through the
user's own tools (launch-backend, launch-command --config).

  python3 bench/nvml_view.py [--out bench/results] [--fake]

Config: `nvml` (4 GiB) and `other` (4 GiB) on GPU 0.  While `other` holds 1 GiB and a helper
process of `nvml` holds 768 MiB, bench/nvml_view_app.py runs as a second process of `nvml`,
allocates 512 MiB and reports torch.cuda.mem_get_info, NVML through ctypes (memory v1/v2,
compute processes), pynvml's answers (when nvidia-ml-py is installed), and nvidia-smi
(--query-gpu, --query-compute-apps, plain) run from inside the client.  nvidia-smi is also run
outside the hook, for the card.  Checks are printed and saved with every raw answer in
<out>/<gpu>-<date>-nvml.{json,md}.

--fake: a dry run on the fake driver and the fake libnvidia-ml.so.1 (make build first; no
torch, no nvidia-smi: those answers are recorded as missing).  On the GPU machine build the hook
in place first: `sh bench/build_hook.sh gemini/native`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import gpu_name

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
APP = str(ROOT / "bench" / "nvml_view_app.py")
MiB, GiB = 1 << 20, 1 << 30
LIMIT = 4 * GiB
CONFIG = "2\nnvml 0.5 1.0 4GiB\nother 0.5 1.0 4GiB\n"
HELPER_MIB, INSPECT_MIB, OTHER_MIB = 768, 512, 1024
PORT = 52700


def env(fake: bool) -> dict[str, str]:
    e = dict(os.environ, PYTHONUNBUFFERED="1")
    e["PYTHONPATH"] = os.pathsep.join(p for p in (e.get("PYTHONPATH", ""), str(ROOT)) if p)
    for k in ("LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "POD_MANAGER_PORT", "POD_NAME"):
        e.pop(k, None)
    if fake:
        from gemini.native import fake_driver_dir

        e["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(fake_driver_dir()), e.get("LD_LIBRARY_PATH", "")) if p)
        e["GEMINI_FAKE_GPU"] = f"/gemini-nvml-bench-{os.getpid()}"
    return e


def client(name: str, conf: Path, mode: str, mib: int, fake: bool) -> subprocess.Popen[str]:
    argv = [PY, "-m", "gemini.cli.launch_command", "--name", name, "--config", str(conf),
            "--backend-port", str(PORT), "--", PY, APP, mode, "--mib", str(mib),
            *(["--fake"] if fake else [])]
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env=env(fake), cwd=ROOT)


def ready(p: subprocess.Popen[str]) -> int:
    line = p.stdout.readline()
    if '"ready"' not in line:
        raise RuntimeError(f"app failed to start: {line.strip() or p.wait()}")
    return int(json.loads(line)["pid"])


def smi_outside(fake: bool) -> dict:
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.total,memory.used",
                            "--format=csv"], capture_output=True, text=True, timeout=60,
                           env=env(fake))
        apps = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                               "--format=csv"], capture_output=True, text=True, timeout=60,
                              env=env(fake))
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"error": str(exc)}
    return {"gpu": r.stdout, "compute_apps": apps.stdout}


def run(fake: bool) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="gem-nvml-"))
    conf = tmp / "resource-config.txt"
    conf.write_text(CONFIG)
    backend = subprocess.Popen(
        [PY, "-m", "gemini.cli.launch_backend", f"{PY} -m gemini.cli.schd",
         f"{PY} -m gemini.cli.pmgr", "--config", str(conf), "--port", str(PORT)],
        stdout=subprocess.PIPE, text=True, env=env(fake), cwd=ROOT, start_new_session=True)
    holders: list[subprocess.Popen[str]] = []
    try:
        for _ in range(3):  # one line per daemon started: the scheduler, two pod managers
            print("   ", backend.stdout.readline().strip(), flush=True)
        holders.append(client("other", conf, "hold", OTHER_MIB, fake))
        other_pid = ready(holders[-1])
        holders.append(client("nvml", conf, "hold", HELPER_MIB, fake))
        helper_pid = ready(holders[-1])
        inspect = client("nvml", conf, "inspect", INSPECT_MIB, fake)
        out, _ = inspect.communicate(timeout=300)
        inside = json.loads(out.splitlines()[-1])
        outside = smi_outside(fake)
    finally:
        for h in holders:
            if h.poll() is None:
                h.stdin.write("done\n")
                h.stdin.flush()
        for h in holders:
            try:
                h.wait(timeout=30)
            except subprocess.TimeoutExpired:
                h.kill()
        os.killpg(backend.pid, signal.SIGINT)
        backend.wait(timeout=30)
        if fake:
            Path("/dev/shm", env(fake)["GEMINI_FAKE_GPU"].lstrip("/")).unlink(missing_ok=True)
    return {"inside": inside, "outside_nvidia_smi": outside,
            "pids": {"other": other_pid, "nvml_helper": helper_pid, "nvml_inspect": inside["pid"]}}


def mib_column(csv: str, column: str) -> list[int]:
    """The MiB values of `column` in nvidia-smi's csv ("memory.total [MiB]": "4096 MiB")."""
    lines = [ln for ln in csv.strip().splitlines() if ln.strip()]
    if not lines:
        return []
    head = [h.strip() for h in lines[0].split(",")]
    at = next((i for i, h in enumerate(head) if h.startswith(column)), None)
    if at is None:
        return []
    return [int(row.split(",")[at].strip().split()[0]) for row in lines[1:]
            if row.split(",")[at].strip().split()[0].isdigit()]


def checks(r: dict, fake: bool) -> list[dict]:
    """(what, expected, got, ok) for each claim of the issue (--fake: no nvidia-smi there)."""
    inside, pids = r["inside"], r["pids"]
    mine = {pids["nvml_helper"], pids["nvml_inspect"]}
    out: list[dict] = []

    def check(what: str, expected, got, ok: bool) -> None:
        out.append({"check": what, "expected": expected, "got": got, "ok": bool(ok)})

    cuda = inside["cuda"]
    check("cudaMemGetInfo total = the limit", LIMIT, cuda["total"], cuda["total"] == LIMIT)
    gpus = inside["nvml"].get("gpus") or [{}]
    gpu0 = gpus[0]
    m1, m2 = gpu0.get("memory", {}), gpu0.get("memory_v2", {})
    check("NVML memory total = the limit", LIMIT, m1.get("total"), m1.get("total") == LIMIT)
    check("NVML memory_v2 total = the limit", LIMIT, m2.get("total"), m2.get("total") == LIMIT)
    check("NVML free = cudaMemGetInfo free (same process)", cuda["free"], m1.get("free"),
          m1.get("free") == cuda["free"] and m2.get("free") == cuda["free"])
    floor = (HELPER_MIB + INSPECT_MIB) * MiB
    check("NVML used = the client's use across its processes (>= 768 + 512 MiB, < 1.5 GiB)",
          f"[{floor}, {floor + 256 * MiB}]", m1.get("used"),
          m1.get("used") is not None and floor <= m1["used"] < floor + 256 * MiB)
    listed = {p for p, _ in gpu0.get("compute_processes", {}).get("procs", [])}
    check("NVML compute processes = the client's", sorted(mine), sorted(listed), listed == mine)
    py = inside["pynvml"]
    if "gpus" in py:
        pm = py["gpus"][0]["memory"]
        check("pynvml memory total / free = torch's", [LIMIT, cuda["free"]],
              [pm["total"], pm["free"]], pm["total"] == LIMIT and pm["free"] == cuda["free"])
        plist = py["gpus"][0]["compute_processes"]
        got = sorted(p for p, _ in plist) if isinstance(plist, list) else plist
        check("pynvml compute processes = the client's", sorted(mine), got, got == sorted(mine))
    smi = inside["nvidia_smi"]
    if "stdout" in smi.get("gpu", {}):
        total = mib_column(smi["gpu"]["stdout"], "memory.total")
        used = mib_column(smi["gpu"]["stdout"], "memory.used")
        check("nvidia-smi memory.total (GPU 0) = 4096 MiB", 4096, total[:1], total[:1] == [4096])
        # nvidia-smi is another process: the inspect process's unspent lease (<= 32 MiB) counts
        want = (m1.get("used") or 0) // MiB
        check("nvidia-smi memory.used ~ NVML used (within the 32 MiB lease)", want, used[:1],
              bool(used) and abs(used[0] - want) <= 33)
        apps = smi["compute_apps"]["stdout"].strip().splitlines()[1:]
        smi_pids = {int(a.split(",")[0]) for a in apps if a.split(",")[0].strip().isdigit()}
        check("nvidia-smi compute apps = the client's (not `other`)", sorted(mine),
              sorted(smi_pids), smi_pids == mine)
    elif not fake:
        check("nvidia-smi ran", "nvidia-smi", smi.get("gpu"), False)
    return out


def markdown(result: dict) -> str:
    lines = [f"# gemini, issue 15 item 1: NVML view — {result['device']}", "",
             f"{result['date']} · `{result['command']}`", "",
             "| check | expected | got | |", "|---|---|---|---|"]
    for c in result["checks"]:
        lines.append(f"| {c['check']} | {c['expected']} | {c['got']} | "
                     f"{'✅' if c['ok'] else '❌'} |")
    smi = result["run"]["inside"]["nvidia_smi"]
    lines += ["", "nvidia-smi inside the client:", "", "```",
              smi.get("gpu", {}).get("stdout", "").strip(),
              smi.get("compute_apps", {}).get("stdout", "").strip(), "```", "",
              "NVML functions the hook answered in nvidia-smi: "
              f"{smi.get('gpu', {}).get('nvml_calls')} / "
              f"{smi.get('compute_apps', {}).get('nvml_calls')}", "",
              "nvidia-smi outside (the card):", "", "```",
              str(result["run"]["outside_nvidia_smi"].get("gpu", "")).strip(), "```"]
    return "\n".join(lines) + "\n"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=str(ROOT / "bench" / "results"))
    p.add_argument("--fake", action="store_true")
    args = p.parse_args()
    t0 = time.time()
    r = run(args.fake)
    device = "fake GPU" if args.fake else gpu_name()
    result = {"device": device, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
              "command": " ".join(["python3", "bench/nvml_view.py", *sys.argv[1:]]),
              "limit": LIMIT, "checks": checks(r, args.fake), "run": r,
              "total_s": round(time.time() - t0, 1)}
    slug = device.split(",")[0].strip().lower().replace(" ", "-").replace("nvidia-", "")
    stem = Path(args.out) / f"{slug}-{time.strftime('%Y%m%d-%H%M%S')}-nvml"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(result))
    print(markdown(result))
    print(f"written: {stem}.json", flush=True)
    return 0 if all(c["ok"] for c in result["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
