"""JAX processes that tuned themselves beside a neighbour: what XLA's autotuner measured, and how
fast each process then ran.

  python3 bench/autotune_beside.py RESULTS.json [RESULTS.json ...] [--json]

Each RESULTS.json is a `bench/paths.py --only pairs --pair-path jax --keep-logs` run made with
BENCH_XLA_AUTOTUNE_DIR set (bench/path_app.py), its `-logs.tar[.xz]` beside it holding XLA's
autotune logs (`autotune-PID.txt`) with the daemons' and hooks' logs.  For each JAX process of
the run, the bare one and each client of the pair and the trio: the fastest candidate XLA
timed, and which.  For each client also the GPU time per launch its hook measured over its run,
the longest its queue ran past a token, whether its hook told XLA's delay kernel, and its
share's worst error in points over 10 s windows and over every 1 s window, from work done,
scored again from its steps (the run's own scoring may have failed after the run).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

from high_seconds import read_steps, rows_of_runs
from paths import PAIR_CASES, launch_cost_of, log_between, pair_entries

HOOK = re.compile(r"gemini-hook\[\S+ (\d+)\]")
OVERRUN = re.compile(r"token end: overuse ([\d.]+) ms")
TOLD = "waits on the GPU for its host"
BARE = re.compile(r"jax: bare rate ([\d.]+) steps/s")
PROFILE = re.compile(r"config_profiles\s*\{")
RUN_TIME = re.compile(r"run_time\s*\{\s*(?:seconds:\s*(\d+)\s*)?(?:nanos:\s*(\d+))?\s*\}")
CONFIG_WORDS = re.compile(r"\b(backend|algorithm|block_m|block_n|block_k|num_stages|num_warps):"
                          r"\s*(\w+)")


def _block(text: str, start: int) -> str:
    """The text inside the braces that open at or after `start`."""
    depth, open_at = 0, text.index("{", start)
    for i in range(open_at, len(text)):
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i]
    return text[open_at + 1:]


def fastest_candidate(autotune_log: str) -> dict | None:
    """The candidate XLA timed fastest (its first instruction's), from an AutotuningLogs
    textproto: {"us": time, "config": "BACKEND key=value ..."}; None if none was timed."""
    at = autotune_log.find("instruction_profiles")
    if at < 0:
        return None
    instruction = _block(autotune_log, at)
    best = None
    for m in PROFILE.finditer(instruction):
        profile = _block(instruction, m.start())
        t = RUN_TIME.search(profile)
        if t is None:
            continue
        us = (int(t[1] or 0) * 1e9 + int(t[2] or 0)) / 1e3
        config = " ".join(f"{k}={v}" if k != "backend" else v
                          for k, v in CONFIG_WORDS.findall(RUN_TIME.sub("", profile)))
        if best is None or us < best["us"]:
            best = {"us": round(us, 1), "config": config}
    return best


def hook_facts(log: str, t0: float, t_end: float) -> dict:
    """A client's process id, GPU time per launch over [t0, t_end], longest run past a token,
    and whether its hook told XLA's delay kernel."""
    pid = HOOK.search(log)
    overruns = [float(x) for x in OVERRUN.findall(log)]
    return {"pid": pid[1] if pid else None,
            "us_per_launch": launch_cost_of(log_between(log, t0, t_end)).get("launch_cost_us"),
            "longest_overrun_ms": max(overruns, default=0.0),
            "told_delay_kernel": TOLD in log}


def run_rows(results: dict, logs: dict[str, str]) -> dict:
    """The processes of one run: {"bare_rate", "bare": [...], "clients": [...]}."""
    notes = " ".join(results.get("notes", []))
    bare_rate = float(m[1]) if (m := BARE.search(notes)) else None
    tuned = {name.removeprefix("autotune-").removesuffix(".txt"): fastest_candidate(text)
             for name, text in logs.items() if name.startswith("autotune-")}
    clients, seen = [], set()
    for case, targets in PAIR_CASES.items():
        tag = "pairs-" + case.replace("/", "-")
        steps = {n: logs.get(f"{tag}-{n}-steps.jsonl") for n, _ in targets}
        if not all(steps.values()) or bare_rate is None:
            continue
        samples = {n: read_steps(text) for n, text in steps.items()}
        t0 = min(s[0][0] for s in samples.values())
        t_end = min(s[-1][0] for s in samples.values())
        ten, one = pair_entries(case, samples, dict(targets), t0, t_end, bare_rate)
        for c10, c1 in zip(ten["clients"], one["clients"], strict=True):
            facts = hook_facts(logs.get(f"{tag}-{c10['name']}.log", ""), t0, t_end)
            seen.add(facts["pid"])
            clients.append({"case": case, "name": c10["name"], "target": c10["target"],
                            "error_pp_10s": c10["error_pp_max"],
                            "error_pp_1s": c1["error_pp_max_sliding"], **facts,
                            "tuned": tuned.get(facts["pid"])})
    bare = [{"pid": pid, "tuned": t} for pid, t in sorted(tuned.items()) if pid not in seen]
    return {"bare_rate": bare_rate, "bare": bare, "clients": clients}


def _tuned(t: dict | None) -> str:
    return f"{t['us']} us, {t['config']}" if t else "—"


def _lines(name: str, rows: dict) -> Iterator[str]:
    for b in rows["bare"]:
        yield f"{name}  bare (pid {b['pid']}): fastest {_tuned(b['tuned'])}"
    for c in rows["clients"]:
        yield (f"{name}  {c['case']} {c['name']}: {c['error_pp_10s']} / "
               f"{c['error_pp_1s']} pp, {c['us_per_launch']} us/launch, past a token "
               f"{c['longest_overrun_ms']} ms at most, fastest {_tuned(c['tuned'])}")


def main(argv: list[str] | None = None) -> int:
    return rows_of_runs(__doc__ or "", argv, run_rows, _lines)


if __name__ == "__main__":
    sys.exit(main())
