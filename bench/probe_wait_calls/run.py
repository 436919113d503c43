"""Which wait and poll calls each kind of program makes under the hook (issue 12: JAX's
block_until_ready adds nothing to the wait its hook measures).  An exploration, not gemini:

  mkdir -p /tmp/probe && git archive 8ee6090 csrc bench/build_hook.sh | tar -x -C /tmp/probe
  (cd /tmp/probe && patch -p1 < $OLDPWD/bench/probe_wait_calls/hook.patch)
  sh /tmp/probe/bench/build_hook.sh /tmp/probehook
  GEMINI_BENCH_HOOK=/tmp/probehook/libgemhook.so.1 \\
      python3 bench/probe_wait_calls/run.py OUT_DIR jax torch-compile torch-eager launch-bound

The patch (against 8ee6090: since 884e573 the hook wraps cuLaunchHostFunc itself) adds
pass-through rows for cuEventQuery, cuStreamQuery(_ptsz) and cuLaunchHostFunc(_ptsz) to the
hook's table (so that they are counted in GEMINI_HOOK_STATS), and
times the not-ready answers of the two queries.  (A plain LD_PRELOAD library sees none of
these: the CUDA runtime and XLA get the driver's functions through cuGetProcAddress.)  Each
program runs 3 s alone under the hook (limit 1.0), syncing every 10 ms; prints its counts."""

import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import GIB, PY, Backend, Client, Procs, base_env

KEYS = ("cuEventQuery", "cuStreamQuery", "cuStreamQuery_ptsz", "cuLaunchHostFunc",
        "cuLaunchHostFunc_ptsz", "cuEventSynchronize", "cuStreamSynchronize",
        "cuStreamSynchronize_ptsz", "cuCtxSynchronize", "cuCtxSynchronize_v2", "gate.holds",
        "gate.hold_ns", "gate.fetch_ns")


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    procs = Procs()
    backend = Backend(procs, [Client("solo", 1.0, 1.0, 16 * GIB)], tag="probe")
    try:
        for path in sys.argv[2:]:
            stats = out / f"{path}.json"
            env = {**base_env(), **backend.hook_env("solo", stats),
                   "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
            p = subprocess.run([PY, "bench/path_app.py", path, "--seconds", "3",
                                "--sync-every-ms", "10", "--no-wait"], env=env,
                               capture_output=True, text=True, timeout=400)
            done = [ln for ln in p.stdout.splitlines() if '"done"' in ln]
            probe = [ln for ln in p.stderr.splitlines() if "probe_not_ready" in ln]
            counts = json.loads(stats.read_text()) if stats.exists() else {}
            print(path, p.returncode, done[-1][:160] if done else p.stderr[-500:])
            print("  ", {k: counts.get(k) for k in KEYS}, probe[-1] if probe else "")
    finally:
        backend.stop()


if __name__ == "__main__":
    main()
