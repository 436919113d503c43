"""After a config edit, how fast does each capped client's work run in its grants, and which
reading of it before the edit says so best?  (Issue 12: from an edit until its next grant is
measured, a client's speed is read from the costs its grants had before it, SpeedMeter.
duty_changed; it was read by the clock until 2026-12-07 22:50.)  No GPU: reads the kept logs of
bench/paths.py's edit cases (`--keep-logs`), extracted as for bench/tail_estimators.py.

Per client of each edit run whose clients are all capped ("capped ..." cases), its speed in
its grants (its work, steps / bare rate, over the GPU time granted it) over three spans: the
6 s before the edit, its first 1.5 s, and 2-8 s after it; and the card's busy share (all
grants) over each.  Readings of the speed after the edit, taken before it, against what its
grants did, apart for the client edited and its neighbours:
  * kept: the speed before the edit, as it stands (SpeedMeter.duty_changed keeps the costs
    that read it: this is that reading without their own error, a bound on it);
  * one: no speed-up (what the H100's clock read after a raise at 22:12);
  * busy: the speed-up scaled by the card's idle share after the edit over before it
    (s - 1 in proportion to 1 - busy: a power-limited card's clock recovers while it idles);
  * sqrt: the same, scaled by the square root of that ratio;
  * code: as gem-schd reads it (speed.busier_scale): the square root, where the card gets
    busier, of the busy share it predicts: that of the second before the edit, plus the
    edited cap's rise over its speed before.
Usage: python3 bench/edit_speeds.py [--logs LOGS]   (LOGS as bench/tail_estimators.py's)
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from tail_estimators import (  # (the kept logs' readers; and the repository's root on the path)
    kept_pair,
    results_with_logs,
    speed_in_grants,
)

from gemini.core.speed import busier_scale

SPANS = {"before": (-6.0, -0.1), "first": (0.05, 1.5), "after": (2.0, 8.0)}


def busy_share(grants: list, a: float, b: float) -> float:
    return sum(max(0.0, min(e, b) - max(s, a)) for _, s, e in grants) / (b - a)


def edit_runs(logs: str):
    """(result, case, path, {client: {span: speed}}, {span: busy}) for each edit run."""
    for res, d, ldir in results_with_logs(logs):
        for p in d.get("pairs") or []:
            if p["window_s"] != 10 or "edited_at_s" not in p or not p["case"].startswith(
                    "capped"):
                continue
            kept = kept_pair(ldir, p)
            if kept is None or len(kept[2]) != len(p["clients"]):
                continue
            _, grants, steps = kept
            t0 = max(s[0][0] for s in steps.values())
            edit = t0 + p["edited_at_s"] + (p.get("edit_applied_ms") or 0) / 1e3
            spans = {k: (edit + a, edit + b) for k, (a, b) in SPANS.items()}
            speeds = {}
            for c in p["clients"]:
                bare = c.get("bare_rate") or p["bare_rate"]
                in_spans = {k: speed_in_grants(steps[c["name"]], grants, c["name"], bare, a, b)
                            for k, (a, b) in spans.items()}
                speeds[c["name"]] = {k: v for k, v in in_spans.items() if v is not None}
            busy = {k: busy_share(grants, a, b) for k, (a, b) in spans.items()}
            busy["second"] = busy_share(grants, edit - 1.0, edit)  # (gem-schd's short window)
            yield res, p["case"], p["path"], speeds, busy


def edited_client(case: str) -> str:
    """The client a case's edit changes: "capped 0.3+0.3 b raised to 0.6" -> "b"."""
    words = case.split()
    return next(w for w, after in itertools.pairwise(words) if after in ("raised", "lowered"))


def predicted_busy(case: str, names: list[str], speeds: dict, busy_second: float) -> float:
    """The busy share gem-schd predicts after the edit: that of the second before it plus the
    edited cap's rise over its speed before ("capped 0.3+0.3 b raised to 0.6")."""
    words = case.split()
    old = dict(zip(names, (float(x) for x in words[1].split("+")), strict=True))
    edited = edited_client(case)
    rise = (float(words[-1]) - old[edited]) / speeds[edited]["before"]
    return min(max(busy_second + rise, 0.0), 1.0)


def readings(before: float, busy_before: float, busy_after: float,
             code: float = 1.0) -> dict[str, float]:
    """`code`: the scale gem-schd applies."""
    scale = (1.0 - busy_after) / (1.0 - busy_before) if busy_before < 1.0 else 1.0
    return {"kept": before, "one": 1.0, "busy": 1.0 + (before - 1.0) * scale,
            "sqrt": 1.0 + (before - 1.0) * scale ** 0.5, "code": 1.0 + (before - 1.0) * code}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--logs", default="/tmp/tail-estimators-logs")
    args = p.parse_args()
    errors: dict[tuple[str, str, str, str, str], list[float]] = {}
    runs = 0
    print("result | case | path | busy before, first, after | client: before, first, after")
    for res, case, path, speeds, busy in edit_runs(args.logs):
        runs += 1
        cells = []
        after = predicted_busy(case, list(speeds), speeds, busy["second"])
        code = busier_scale(busy["second"], after)
        for name, s in sorted(speeds.items()):
            if not {"before", "first", "after"} <= s.keys():
                continue
            cells.append(f"{name} {s['before']:.3f} {s['first']:.3f} {s['after']:.3f}")
            role = "edited" if name == edited_client(case) else "beside"
            group = (res.split("-")[0], "raised" if "raised" in case else "lowered", role)
            for span in ("first", "after"):
                for k, v in readings(s["before"], busy["before"], busy[span], code).items():
                    errors.setdefault((*group, span, k), []).append(v - s[span])
        print(f"{res} | {case} | {path} | {busy['before']:.3f} {busy['first']:.3f} "
              f"{busy['after']:.3f} | {' | '.join(cells)}")
    print(f"\n{runs} edit runs.  Reading - what the grants did (speed), per client-run, by card,"
          " edit and client (the one edited, or one beside it):")
    for (card, edit, role, span, k), v in sorted(errors.items()):
        rms = statistics.fmean(x * x for x in v) ** 0.5
        print(f"  {card} {edit:7s} {role:6s} {span:6s} {k:5s} n {len(v):3d}  "
              f"mean {statistics.fmean(v):+.4f}  rms {rms:.4f}  worst {max(v, key=abs):+.4f}")


if __name__ == "__main__":
    main()
