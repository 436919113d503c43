"""Two builds of the hook, A/B, on the fake GPU: a capped client's work against the same
program bare (issue 12: to check a hook change on program shapes the GPU run did not cover).

  python3 bench/hook_ab_fake.py --old REV [--kernel-ms 0.05] [--idle-ms 0.1] [--burst 1]
                                [--sync none] [--seconds 3] [--rounds 3] [--cap 0.4] [--out DIR]

Builds the hook of git revision REV (in a temporary worktree) and of the working tree.  Each
round runs, in turn (the order alternating): the fake GPU's test client (csrc/fake/programs,
`gem_client work`) bare, then under each hook as the only client of fresh daemons, capped at
--cap.  A client's share is its kernels ÷ the bare run's of its round; the answer is the median
per hook, with the spread.  The fake GPU runs kernels in queue order and its clock never
changes: this tells the gate's behaviour apart, not a GPU's.  A program the host paces is one
whose --idle-ms between launches is longer than its kernels.  The client counts the kernels it
launched, not those that ran: a program that outruns the GPU and never syncs counts its
backlog too (bare, up to the fake GPU's queue; 1 ms kernels 0.2 ms apart read 0.30 of bare
capped at 0.4, and the run after a bare one 0.23, behind its backlog): give it --sync."""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    PY,
    ROOT,
    Backend,
    Client,
    Procs,
    base_env,
    fake_env,
    fake_gpu_segment,
    kernels,
    print_and_write,
)


def build_hooks(old: str, tmp: Path) -> dict[str, Path]:
    """The hook of `old` and of the working tree, each built by its own tree's build code."""
    tree = tmp / "old-tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), old],
                   check=True)
    hooks = {}
    try:
        for name, root in (("old", tree), ("new", ROOT)):
            out = tmp / name
            out.mkdir()
            code = ("import sys; from pathlib import Path; sys.path.insert(0, sys.argv[1]); "
                    "from gemini.native import _build; _build.build_hook(Path(sys.argv[2]))")
            subprocess.run([PY, "-c", code, str(root), str(out)], check=True,
                           capture_output=True)
            hooks[name] = out / "libgemhook.so.1"
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       check=False)
    return hooks


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--old", required=True, help="git revision of the hook to compare against")
    p.add_argument("--kernel-ms", default="0.05")
    p.add_argument("--idle-ms", default="0.1", help="host time between launches")
    p.add_argument("--burst", default="1")
    p.add_argument("--sync", default="none", help="gem_client's --sync (none, stream, ctx)")
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cap", type=float, default=0.4)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    from gemini.native import program_path

    app = [str(program_path("gem_client")), "work", "--kernel-ms", args.kernel_ms,
           "--idle-ms", args.idle_ms, "--burst", args.burst, "--sync", args.sync,
           "--seconds", f"{args.seconds:g}", "--allocs", "1", "--bytes", str(1 << 20)]
    shares: dict[str, list[float]] = {"old": [], "new": []}
    bare: list[int] = []
    with (tempfile.TemporaryDirectory(prefix="gem-hook-ab-") as tmp, fake_gpu_segment() as gpu,
          Procs() as procs):
        env = {**base_env(), **fake_env(gpu)}
        hooks = build_hooks(args.old, Path(tmp))
        for i in range(args.rounds):
            bare.append(kernels(procs, app, env, "bare"))
            for name in (("old", "new") if i % 2 == 0 else ("new", "old")):
                backend = Backend(procs, [Client("cap", args.cap, args.cap)], tag="hook-ab")
                try:
                    run_env = {**env, **backend.hook_env("cap"), "LD_PRELOAD": str(hooks[name])}
                    shares[name].append(round(kernels(procs, app, run_env, name) / bare[-1],
                                              4))
                finally:
                    backend.stop()
            print(f"round {i}: bare {bare[-1]} kernels, shares old {shares['old'][-1]} "
                  f"new {shares['new'][-1]}", flush=True)
    out = {
        "command": ["bench/hook_ab_fake.py", *(argv if argv is not None else sys.argv[1:])],
        "device": "fake-gpu", "fake_gpu": gpu, "cap": args.cap, "bare_kernels": bare,
        "shares": shares,
        "median": {k: statistics.median(v) for k, v in shares.items()},
        "min_max": {k: [min(v), max(v)] for k, v in shares.items()},
    }
    print_and_write(out, args.out, "hook-ab-fake")
    return 0


if __name__ == "__main__":
    sys.exit(main())
