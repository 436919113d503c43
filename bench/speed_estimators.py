"""Which of a capped client's calibration tails stands for its bare cost per launch (issue 12)?

  python3 bench/speed_estimators.py [RESULTS-paths.json ...] [--since YYYYMMDD] [--out DIR]

A capped client is charged `speed` seconds for each second granted: its cost per launch run
continuously (read in the tails of its calibrations) over its ordinary grants' (gemini.core.speed).
Which tail, or which middle of them, tells the work it really does?  For each capped run that
`bench/paths.py --keep-logs` kept (default: every results file in bench/results with its logs
beside it), each client read by work, and each interval between two of its scheduler's
"calibrated: speed S (by work: G us per launch in its grants, in the latest tails T1, T2, ...)"
lines (from MARGIN_S after one to MARGIN_S before the next, or its last step; at least
MIN_INTERVAL_S long, from SKIP_FIRST_S after its first grant on): the work it did per granted
second (its steps ÷ the program's bare rate ÷ its grant time there) against each estimator's
speed, E(tails) / G, and the speed it was charged, S.  An estimator that reads 2 % high charges
2 % too much: the client does that much less than its cap.  Prints, per device and kind (a
cap alone; a capped pair or trio), each one's mean error and mean absolute error in %, as JSON.
The tails are as the line lists them, before the scheduler drops a lone slow one.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import print_and_write
from high_seconds import _logs_beside, read_grants, read_logs, read_steps
from paths import shares

RESULTS = Path(__file__).resolve().parent / "results"
MARGIN_S = 0.3
MIN_INTERVAL_S = 1.5
SKIP_FIRST_S = 5.0
BY_WORK = re.compile(r"\[(\d+\.\d+)\] \[([^]]+)\] calibrated: speed ([\d.]+) \(by work: "
                     r"([\d.]+) us per (?:graph )?launch in its grants(?: \([^)]*\))?, "
                     r"in the latest tails ([\d.]+(?:, [\d.]+)*)")
ESTIMATORS: dict[str, Callable[[list[float]], float]] = {
    "slowest": max,
    "median": statistics.median,
    "mean": statistics.fmean,
    "second slowest": lambda tails: sorted(tails)[-2] if len(tails) > 1 else tails[0],
    "fastest": min,
}


def capped_runs(results: dict, texts: dict[str, str]) -> list[tuple[str, str, str, float]]:
    """(kind, log prefix, client, bare rate) of each capped run whose logs were kept."""
    out = []
    for path, r in (results.get("paths") or {}).items():
        if r.get("cap_bare_rate") and f"cap-{path}-schd.log" in texts:
            out.append(("cap", f"cap-{path}", "cap", r["cap_bare_rate"]))
    for p in results.get("pairs") or []:
        if not p.get("case", "").startswith("capped") or p.get("window_s") != 10:
            continue
        prefix = "pairs-" + p["case"].replace(" ", "").replace("/", "-").replace("+", "-")
        for c in p["clients"]:
            bare = c.get("bare_rate") or p.get("bare_rate")
            if bare and f"{prefix}-schd.log" in texts:
                out.append(("pairs", prefix, c["name"], bare))
    return out


def intervals(texts: dict[str, str], prefix: str, client: str, bare: float) -> list[dict]:
    """Each interval between the client's calibrations read by work: its work per granted
    second ("actual"), the speed it was charged and each estimator's."""
    grants = read_grants(texts.get(f"{prefix}-grants.json", "[]"), client)
    steps_name = f"{prefix}-steps.jsonl" if client == "cap" else f"{prefix}-{client}-steps.jsonl"
    samples = read_steps(texts.get(steps_name, ""))
    if not grants or len(samples) < 2:
        return []
    lines = [(float(m[1]), float(m[3]), float(m[4]), [float(x) for x in m[5].split(", ")])
             for m in BY_WORK.finditer(texts[f"{prefix}-schd.log"]) if m[2] == client]
    if not lines:
        return []
    ends = [t for t, *_ in lines[1:]] + [samples[-1][0] + MARGIN_S]
    out = []
    for (t, charged, cost, tails), end in zip(lines, ends, strict=True):
        lo, hi = max(t, grants[0].start + SKIP_FIRST_S) + MARGIN_S, end - MARGIN_S
        if hi - lo < MIN_INTERVAL_S or hi > samples[-1][0]:
            continue
        granted = sum(max(0.0, min(hi, g.end) - max(lo, g.start)) for g in grants)
        if granted <= 0.0:
            continue
        actual = shares(samples, [(lo, hi)], bare)[0] * (hi - lo) / granted
        if actual <= 0.0:  # (no step counted there: nothing to weigh a speed against)
            continue
        speeds = {"charged": charged} | {k: f(tails) / cost for k, f in ESTIMATORS.items()}
        out.append({"actual": actual, **speeds})
    return out


def summary(rows: list[dict]) -> dict:
    """Each estimator's error against the work done, in %: mean and mean absolute."""
    out: dict = {"intervals": len(rows)}
    for k in ["charged", *ESTIMATORS]:
        errors = [100 * (r[k] / r["actual"] - 1) for r in rows]
        out[k] = {"mean_pct": round(statistics.fmean(errors), 2),
                  "mae_pct": round(statistics.fmean(abs(e) for e in errors), 2)}
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results", nargs="*", type=Path)
    p.add_argument("--since", default="", help="only results files of this date (YYYYMMDD) on")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()
    files = args.results or sorted(RESULTS.glob("*-paths*.json"))
    groups: dict[str, list[dict]] = defaultdict(list)
    runs: dict[str, int] = defaultdict(int)
    read = []
    for f in files:
        date = re.search(r"-(\d{8})-\d{6}-", f.name)
        logs = _logs_beside(f)
        if logs is None or (date and date[1] < args.since):
            continue
        results = json.loads(f.read_text())
        texts = read_logs(logs)
        device = results.get("device") or f.name.split("-")[0]
        for kind, prefix, client, bare in capped_runs(results, texts):
            rows = intervals(texts, prefix, client, bare)
            if rows:
                groups[f"{device} {kind}"] += rows
                runs[f"{device} {kind}"] += 1
        read.append(f.name)
    out = {"device": "no-gpu", "read": "the kept logs", "command": " ".join(sys.argv),
           "since": args.since, "files": len(read),
           "groups": {g: {"client_runs": runs[g], **summary(rows)} for g, rows in groups.items()}}
    print_and_write(out, args.out, "speed-estimators")


if __name__ == "__main__":
    main()
