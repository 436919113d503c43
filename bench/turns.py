"""Where a client of several processes loses work: the turns the GPU takes between their
contexts, read from each process's steps as they ended on the GPU (`bench/paths.py --only
procs-pairs --keep-logs`).

  python3 bench/turns.py LOGS.tar[.xz] [--case pairs-0.5-0.5ax2] [--client a] [--path P]
                        [--long-ms 1.5]

For the client's processes in the case (`<case>-<client>[<i>]-steps.jsonl`), inside its grants
(`<case>-grants.json`), and for as many processes of the program bare together
(`bare-together-<path>-x<n>-<i>-steps.jsonl`, the whole run but its first RUN_SKIP_S; --path
picks the program where the logs hold several): steps per second of the time measured, the
mean gap between consecutive steps of any of them, how many steps of one process come in a
row (a turn), and the gaps longer than --long-ms, how many of them fall where a turn passes
from one process to another.  Prints one JSON object.  A step is a sample of a process's
step counter that rose: one step on the paths that time each step on the GPU (torch eager,
CuPy, CUDA graphs, Triton), several on the others, whose turns this does not read.

On the H200 (2026-12-04 21:24) a client of two torch eager processes did 0.944 of their bare
work together per granted second; inside its grants its turns lasted 2.3 steps, and 521 of its
538 gaps over 1.5 ms fell at a turn's end.
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import re
import statistics
import sys
from pathlib import Path

from high_seconds import read_grants, read_logs, read_steps

RUN_SKIP_S = 0.5  # bare together: the first steps, while the processes start to share the GPU


def step_ends(text: str) -> list[float]:
    """The times of a steps file's samples whose counter rose (not its opening one, at 0)."""
    ends, done = [], 0.0
    for t, steps in sorted(read_steps(text)):
        if steps > done:
            ends.append(t)
        done = max(done, steps)
    return ends


def turns(ends: dict[str, list[float]], spans: list[tuple[float, float]],
          long_ms: float) -> dict:
    """The processes' step ends (`ends`, by process) inside `spans`: see the module's text."""
    merged = sorted((t, p) for p, ts in ends.items() for t in ts)
    times = [t for t, _ in merged]
    seconds = steps = 0.0
    gaps: list[float] = []
    runs: list[int] = []
    long_at_turn = long_within = 0
    for start, end in spans:
        inside = merged[bisect.bisect_left(times, start):bisect.bisect_left(times, end)]
        seconds += end - start
        steps += len(inside)
        run = 1
        for (t0, p0), (t1, p1) in itertools.pairwise(inside):
            gap_ms = (t1 - t0) * 1000
            gaps.append(gap_ms)
            if p0 == p1:
                run += 1
            else:
                runs.append(run)
                run = 1
            if gap_ms > long_ms:
                long_at_turn += p0 != p1
                long_within += p0 == p1
        if inside:
            runs.append(run)
    return {"spans": len(spans), "seconds": round(seconds, 3),
            "steps_per_s": round(steps / seconds, 1) if seconds else None,
            "gap_ms_mean": round(statistics.mean(gaps), 3) if gaps else None,
            "gap_ms_p50": round(statistics.median(gaps), 3) if gaps else None,
            "turn_steps_mean": round(statistics.mean(runs), 2) if runs else None,
            "long_gaps_at_turns": long_at_turn, "long_gaps_within_turns": long_within}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("logs", type=Path)
    p.add_argument("--case", default="pairs-0.5-0.5ax2")
    p.add_argument("--client", default="a")
    p.add_argument("--path", help="the program bare together (where the logs hold several)")
    p.add_argument("--long-ms", type=float, default=1.5)
    a = p.parse_args(argv)
    files = read_logs(a.logs)
    mine = re.compile(rf"{re.escape(a.case)}-{re.escape(a.client)}(\d*)-steps\.jsonl$")
    ends = {m.group(1): e for name, text in files.items()
            if (m := mine.match(name)) and (e := step_ends(text))}
    if not ends:
        sys.exit(f"turns: no steps of {a.client}'s processes in {a.case} in {a.logs}")
    grants = read_grants(files.get(f"{a.case}-grants.json", "[]"), a.client)
    first = max(ts[0] for ts in ends.values())
    last = min(ts[-1] for ts in ends.values())
    spans = [(g.start, g.end) for g in grants if g.start >= first and g.end <= last]
    out = {"case": a.case, "client": a.client, "processes": len(ends),
           "in_grants": turns(ends, spans, a.long_ms)}
    bare_name = re.compile(rf"bare-together-(.+)-x{len(ends)}-(\d+)-steps\.jsonl$")
    paths = {m.group(1) for name in files if (m := bare_name.match(name))}
    if a.path is None and len(paths) > 1:
        sys.exit(f"turns: the logs hold {len(ends)} processes bare together of "
                 f"{', '.join(sorted(paths))}: say which with --path")
    bare = {m.group(2): e for name, text in files.items()
            if (m := bare_name.match(name)) and m.group(1) == (a.path or m.group(1))
            and (e := step_ends(text))}
    if bare:
        start = max(ts[0] for ts in bare.values()) + RUN_SKIP_S
        end = min(ts[-1] for ts in bare.values())
        out["bare_together"] = turns(bare, [(start, end)] if end > start else [], a.long_ms)
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
