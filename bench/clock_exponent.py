"""How well does the clock say how fast a capped client's grants run?  (Issue 12: a client not
yet read by work is read by the clock, speed = (MHz in its grants / MHz run continuously) **
speed.WORK_PER_CLOCK, 0.85 from a lone 0.4 cap on the H100, 2026-11-24.)  No GPU: reads the
kept logs (extracted as for bench/tail_estimators.py).

For each "calibrated: speed S (by ...; F MHz in its grants, C MHz run continuously ...; waited
on the GPU in W% ...)" line of a capped client that the GPU paces (W >= 20 %) and whose clocks
differ (F / C > 1.03), what its grants did from then to its next calibration (at most 3 s, at
least 1.5): its work (steps / bare rate) over the GPU time granted it.  Per card, kind of run
(pairs: two or three capped clients in shared turns; lone: one capped client) and how the
line read its speed (by the clock, or by work, where the clocks are logged beside): the
logged speed's mean error, and that of (F / C) ** e for a few exponents e.
Usage: python3 bench/clock_exponent.py [--logs LOGS]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tail_estimators import (  # (the kept logs' readers)
    kept_pair,
    read_steps,
    read_text,
    results_with_logs,
    speed_in_grants,
)

LINE = re.compile(r"\[(\d+\.\d+)\] \[([\w.-]+)\] calibrated: speed ([\d.]+) \(by (the clock|work):"
                  r" .*?; (\d+) MHz in its grants, (\d+) MHz run continuously.*?waited on the "
                  r"GPU in ([\d.]+)%")
EXPONENTS = (0.4, 0.5, 0.6, 0.7, 0.85, 1.0, 1.3)
GPU_PACED = 0.2
CLOCKS_DIFFER = 1.03
SPAN_S = (1.5, 3.0)


def readings(schd: str, name: str, grants: list, steps: list, bare: float) -> list[dict]:
    """Each of `name`'s calibration lines with its clocks, and what its grants did after it."""
    lines = [m for m in LINE.finditer(schd) if m.group(2) == name]
    out = []
    for i, m in enumerate(lines):
        t = float(m.group(1))
        until = float(lines[i + 1].group(1)) if i + 1 < len(lines) else math.inf
        end = min(until, t + SPAN_S[1])
        did = speed_in_grants(steps, grants, name, bare, t, end)
        if t < steps[0][0] or end > steps[-1][0] or end - t < SPAN_S[0] or did is None:
            continue
        out.append({"by": m.group(4), "logged": float(m.group(3)),
                    "ratio": int(m.group(5)) / int(m.group(6)), "wait": float(m.group(7)) / 100,
                    "did": did})
    return out


def runs(logs: str):
    """(card, kind, path, readings) for each capped client of each kept run."""
    for res, d, ldir in results_with_logs(logs):
        card = res.split("-")[0]
        for p in d.get("pairs") or []:
            if p["window_s"] != 10 or "capped" not in p["case"] or not isinstance(
                    p.get("bare_rate"), (int, float)) or (kept := kept_pair(ldir, p)) is None:
                continue
            tag, grants, steps = kept
            if not os.path.exists(f"{tag}-schd.log"):
                continue
            schd = read_text(f"{tag}-schd.log")
            for c in p["clients"]:
                if c["name"] in steps:
                    bare = c.get("bare_rate") or p["bare_rate"]
                    yield card, "pairs", p["path"], readings(schd, c["name"], grants,
                                                             steps[c["name"]], bare)
        for path, v in (d.get("paths") or {}).items():
            tag = os.path.join(ldir, f"cap-{path}")
            if isinstance(v, dict) and v.get("cap_work_per_granted_s") and os.path.exists(
                    f"{tag}-schd.log"):
                grants = json.loads(read_text(f"{tag}-grants.json"))
                yield card, "lone", path, readings(read_text(f"{tag}-schd.log"), "cap", grants,
                                                   read_steps(f"{tag}-steps.jsonl"),
                                                   v["cap_bare_rate"])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--logs", default="/tmp/tail-estimators-logs")
    args = p.parse_args()
    groups: dict[tuple[str, str, str], list[dict]] = {}
    paths: dict[tuple[str, str, str], list[str]] = {}
    for card, kind, path, rs in runs(args.logs):
        for r in rs:
            if r["wait"] >= GPU_PACED and r["ratio"] > CLOCKS_DIFFER:
                groups.setdefault((card, kind, r["by"]), []).append(r)
                paths.setdefault((card, kind, r["by"]), []).append(path)
    print("card kind by | n | logged - did | (F / C) ** e - did, mean / rms, for e in "
          f"{', '.join(map(str, EXPONENTS))} | median e that fits | runs' paths")
    for key, rs in sorted(groups.items()):
        logged = statistics.fmean(r["logged"] - r["did"] for r in rs)
        cells = []
        for e in EXPONENTS:
            err = [r["ratio"] ** e - r["did"] for r in rs]
            rms = statistics.fmean(x * x for x in err) ** 0.5
            cells.append(f"{statistics.fmean(err):+.3f}/{rms:.3f}")
        fits = statistics.median(math.log(r["did"]) / math.log(r["ratio"])
                                 for r in rs if r["did"] > 0)
        kinds = {k: paths[key].count(k) for k in sorted(set(paths[key]))}
        print(f"{' '.join(key)} | {len(rs)} | {logged:+.3f} | {' '.join(cells)} | {fits:.2f} | "
              f"{kinds}")


if __name__ == "__main__":
    main()
