"""The 1 s errors of earlier runs over every 1 s window, from their kept logs.

  python3 bench/rescore_sliding.py RESULTS.json [RESULTS.json ...] [--json]

Before 2026-12-05 10:00, bench/paths.py judged a pair's 1 s shares and a capped run's worst
1 s error over the run's whole seconds alone; a second's two halves at 0.5 and 0.1 of a 0.3
target read 0.3 there.  Each capped run (`cap-P-steps.jsonl`) and each plain pair or trio
(`pairs-CASE-CLIENT-steps.jsonl`; not the late, edited or several-process cases) of a results
file whose `-logs.tar[.xz]` lies beside it is scored again over windows sliding by
paths.SLIDE_STEP_S: the worst error in points both ways, beside the whole seconds' as the
file has it.  A capped run is scored exactly as paths.cap_metrics does; a pair from its
clients' first sample (paths.py's start is not kept), a second warm, as pair_entries does.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

from high_seconds import read_steps, rows_of_runs
from paths import (
    CAP_TARGET,
    EDIT_PAIR_CASES,
    LATE_PAIR_CASES,
    PAIR_WARM_S,
    PROCS_PAIR_CASES,
    SLIDE_STEP_S,
    cap_metrics,
    shares,
    sliding_summary,
    window_list,
)


def caps(results: dict, logs: dict[str, str]) -> list[dict]:
    out = []
    for path, r in sorted(results.get("paths", {}).items()):
        text = logs.get(f"cap-{path}-steps.jsonl")
        if not text or not r.get("cap_bare_rate"):
            continue
        m = cap_metrics(read_steps(text), r["cap_bare_rate"], r.get("cap_target", CAP_TARGET))
        out.append({"cap": path, "whole_s_pp": r.get("cap_err1_max_pp"),
                    "sliding_pp": m["cap_err1_sliding_max_pp"],
                    "low": m["cap_low1_sliding"], "high": m["cap_high1_sliding"]})
    return out


def pair_tag(case: str) -> str:
    return "pairs-" + case.replace(" ", "").replace("/", "-").replace("+", "-")


def pairs(results: dict, logs: dict[str, str]) -> list[dict]:
    out = []
    skip = {*LATE_PAIR_CASES, *EDIT_PAIR_CASES, *PROCS_PAIR_CASES}
    for e in results.get("pairs", []):
        if e.get("window_s") != 1 or "clients" not in e or e["case"] in skip:
            continue
        steps = {c["name"]: logs.get(f"{pair_tag(e['case'])}-{c['name']}-steps.jsonl")
                 for c in e["clients"]}
        if not all(steps.values()):
            continue
        samples = {n: read_steps(t) for n, t in steps.items() if t}
        t0 = min(s[0][0] for s in samples.values())
        t_end = min(s[-1][0] for s in samples.values())
        slide = window_list(t0 + PAIR_WARM_S, t_end, 1.0, SLIDE_STEP_S)
        for c in e["clients"]:
            bare = c.get("bare_rate") or e.get("bare_rate")
            if not bare:
                continue
            every = sliding_summary(shares(samples[c["name"]], slide, bare), c["target"])
            out.append({"pair": e["case"], "client": c["name"], "target": c["target"],
                        "whole_s_pp": c.get("error_pp_max"),
                        "sliding_pp": every["error_pp_max_sliding"],
                        "low": every["low_sliding"], "high": every["high_sliding"]})
    return out


def _rows(results: dict, logs: dict[str, str]) -> dict:
    return {"caps": caps(results, logs), "pairs": pairs(results, logs)}


def _lines(name: str, rows: dict) -> Iterator[str]:
    for r in rows["caps"]:
        yield (f"{name}  cap {r['cap']}: whole seconds {r['whole_s_pp']} pp, every "
               f"window {r['sliding_pp']} pp ({r['low']}-{r['high']})")
    for r in rows["pairs"]:
        yield (f"{name}  {r['pair']} {r['client']} ({r['target']}): whole seconds "
               f"{r['whole_s_pp']} pp, every window {r['sliding_pp']} pp "
               f"({r['low']}-{r['high']})")


def main(argv: list[str] | None = None) -> int:
    return rows_of_runs(__doc__ or "", argv, _rows, _lines)


if __name__ == "__main__":
    sys.exit(main())
