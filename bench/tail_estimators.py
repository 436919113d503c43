"""Which estimator of a capped client's continuous cost per launch matches what its grants did?
(Issue 12: capped clients on the H100 did 1-4 points under their caps, their speed read over
what their grants did.)  No GPU: reads bench/results/*.json and their kept logs
(`bench/paths.py --keep-logs`: <result>-logs.tar.xz, extracted under LOGS/<result name>/).

Per capped client in each case (pairs: `pairs-<case>-*`, lone caps: `cap-<path>-*`):
  * its "calibrated: speed S (by work: G us per launch in its grants, in the latest tails
    T1, ..., Tn ...; waited on the GPU in W% ...)" lines (by the clock: skipped);
  * steady = the last 2/3 of its measured run (pairs: 1 s after the start, or from the config
    edit, to the end; caps: the capped samples);
  * real = work / granted over the steady part (steps / bare rate over the grants' overlap),
    and the JSON's mean / granted (whole measured run) beside it;
  * each estimator e(tails) / G, clamped to [1, 2] and scaled by the GPU-bound share as
    SpeedMeter.speed does, time-weighted over the steady part (each calibration's value holds
    until the next); "logged" is the scheduler's own line (the logs' code: until 2026-12-07
    11:40 the slowest, "max"; to 22:40, "new4trim"; since, "4trim").  "+floor" columns apply
    the current code's settling floor (LONG_GRANTS_UNKNOWN_SPEED / UNKNOWN_SPEED scaled by
    idle share while within SETTLE_S of the client's first grant and the estimate > SPED_UP).
Last, the same in points of share off the cap, per card: how many client-runs each estimator
would have left more than 1 and 2 points off over their steady part.
Extract first:  for f in bench/results/*2026120[67]*-logs.tar.xz; do
    n=$(basename $f -logs.tar.xz); mkdir -p LOGS/$n; tar xJf $f -C LOGS/$n; done
Usage: python3 bench/tail_estimators.py [--logs LOGS] [--table] [--csv out.csv]
                                        [--only SUBSTRING-of-run-name]
(LOGS: /tmp/tail-estimators-logs unless given.)
"""
from __future__ import annotations

import glob
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from gemini.core.speed import (  # (the rules the estimators apply, as the scheduler)
    ALIKE_COST_SPREAD,
    GPU_BOUND,
    IDLE_FOR_UNKNOWN,
    LONE_SLOW_TAIL,
    LONG_GRANTS_UNKNOWN_SPEED,
    RUN_SPREAD_MAX,
    SETTLE_S,
    SPED_UP,
    UNKNOWN_SPEED,
    _mean_but_fastest,
    _tails_mean,
)
from gemini.core.speed import _believable_tails as believable

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")
LOGS = "/tmp/tail-estimators-logs"  # (--logs)
PREFIXES = ("h100-80gb-hbm3-20261207", "h200-20261207", "h100-80gb-hbm3-20261206", "h200-20261206")

CAL = re.compile(r"\[(\d+\.\d+)\] \[([^\]]+)\] calibrated: speed ([\d.]+) \(by (work|the clock): "
                 r"([\d.]+|not measured) us per (?:graph )?launch in its grants"
                 r"(?: \(before the edit\))?, in the latest "
                 r"tails ([^;(]*?)(?: \(the first, a floor: ([\d.]+)\))?;.*?waited on the GPU "
                 r"in (not said|[\d.]+%)")


def newest_where_slower(t):
    """The scheduler's rule from 2026-12-07 11:40 to 22:40: the mean of the latest 4 but the
    fastest, or the newest where slower (a card still heating), but not a newest that alone
    parts from the others (past RUN_SPREAD_MAX from the fastest, LONE_SLOW_TAIL from the one
    before it)."""
    mean = _tails_mean(t)
    alone = len(t) > 1 and t[-1] > RUN_SPREAD_MAX * min(t[:-1]) and t[-1] > LONE_SLOW_TAIL * t[-2]
    return mean if alone else max(mean, t[-1])


def second_slowest(t):
    s = sorted(t)
    return s[-2] if len(s) >= 2 else s[-1]


ESTIMATORS = {
    "max": max,  # the rule until 2026-12-07 11:40 (with believable())
    "med": statistics.median,
    "2nd": second_slowest,
    "mean": statistics.fmean,
    "last": lambda t: t[-1],
    "min": min,
    "max3": lambda t: max(t[-3:]),  # the slowest of the latest 3 only
    "trim": _mean_but_fastest,
    "trimlast": lambda t: max(t[-1], _mean_but_fastest(t)),
    "new3": lambda t: statistics.fmean(t[-3:]),
    "new3last": lambda t: max(t[-1], statistics.fmean(t[-3:])),
    "new4trim": newest_where_slower,  # (the scheduler's rule 2026-12-07 11:40-22:40)
    "4trim": _tails_mean,  # (the scheduler's rule since 2026-12-07 22:40)
}


def read_steps(path):
    with open(path) as f:
        return [(r["t"], r["steps"]) for r in map(json.loads, f) if "t" in r]


def progress(s, t):
    if t <= s[0][0]:
        return s[0][1]
    if t >= s[-1][0]:
        return s[-1][1]
    lo, hi = 0, len(s) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if s[mid][0] <= t else (lo, mid)
    (t0, n0), (t1, n1) = s[lo], s[hi]
    return n0 + (n1 - n0) * (t - t0) / (t1 - t0) if t1 > t0 else n1


def held(grants, name, a, b):
    return sum(max(0.0, min(e, b) - max(s, a)) for n, s, e in grants if n == name)


def speed_in_grants(steps, grants, name, bare, a, b):
    """`name`'s work over [a, b] (steps / its bare rate) per second its grants held the GPU
    there (None: they held none)."""
    g = held(grants, name, a, b)
    return (progress(steps, b) - progress(steps, a)) / bare / g if g > 0 else None


def kept_pair(ldir, p):
    """A pairs case's kept files: (their prefix, its grants, {client: steps} of the clients
    whose steps were kept), or None where its grants were not."""
    tag = os.path.join(ldir, case_tag(p["case"]))
    if not os.path.exists(f"{tag}-grants.json"):
        return None
    grants = json.loads(read_text(f"{tag}-grants.json"))
    steps = {c["name"]: read_steps(f) for c in p["clients"]
             if os.path.exists(f := f"{tag}-{c['name']}-steps.jsonl")}
    return tag, grants, steps


def cal_lines(schd, name):
    out = []
    for m in CAL.finditer(schd):
        t, who, speed, by, g, tails, _first, wait = m.groups()
        if who != name:
            continue
        tl = [float(x) for x in tails.split(",")] if tails.strip() not in ("none", "") else []
        w = None if wait == "not said" else float(wait[:-1]) / 100
        out.append(dict(t=float(t), speed=float(speed), by=by,
                        g=None if g == "not measured" else float(g), tails=tl, wait=w))
    return out


def estimates(c, floor_of):
    """Each estimator's speed at calibration line c (None where not by work)."""
    if c["by"] != "work" or not c["tails"] or not c["g"]:
        return None
    bound = 1.0 if c["wait"] is None else min(c["wait"] / GPU_BOUND, 1.0)
    bel = believable(c["tails"])
    out = {}
    for k, f in ESTIMATORS.items():
        fast = min(max(f(bel) / c["g"], 1.0), 2.0)
        out[k] = 1.0 + (fast - 1.0) * bound
        fl = floor_of(c["t"], fast)
        out[k + "+f"] = 1.0 + (max(fast, fl) - 1.0) * bound
    out["logged"] = c["speed"]
    return out


def weighted(cals, a, b, floor_of):
    """Time-weighted estimates over [a, b]: each line's values hold until the next line."""
    segs = []
    for i, c in enumerate(cals):
        s = max(c["t"], a)
        e = min(cals[i + 1]["t"] if i + 1 < len(cals) else b, b)
        if e <= s:
            continue
        est = estimates(c, floor_of)
        if est is not None:
            segs.append((e - s, est))
    tot = sum(w for w, _ in segs)
    if tot < 0.25 * (b - a):
        return None, 0
    keys = segs[0][1].keys()
    return {k: sum(w * e[k] for w, e in segs) / tot for k in keys}, len(segs)


def make_floor(first, idle, long_grants):
    unknown = LONG_GRANTS_UNKNOWN_SPEED if long_grants else UNKNOWN_SPEED

    def floor_of(t, fast):
        if t - first < SETTLE_S and fast > SPED_UP:
            return 1.0 + min(idle / IDLE_FOR_UNKNOWN, 1.0) * (unknown - 1.0)
        return 1.0
    return floor_of


def row(kind, res, case, path, name, cap, schd, steps, grants, bare, a, b, json_real, idle,
        long_grants):
    cals = cal_lines(schd, name)
    if not cals:
        return None
    first = min((s for n, s, _ in grants if n == name), default=a)
    sa = a + (b - a) / 3.0
    # the line in force at sa: the last one at or before it
    before = [c for c in cals if c["t"] <= sa]
    use = before[-1:] + [c for c in cals if sa < c["t"] <= b]
    est, n = weighted(use, sa, b, make_floor(first, idle, long_grants))
    if est is None:
        return None
    g = held(grants, name, sa, b)
    real = speed_in_grants(steps, grants, name, bare, sa, b)
    # the calibration grants' tails (their second half, CALIBRATION_SETTLE_S / CALIBRATION_S)
    # ran at the continuous speed and are charged 1: take them out of `real`
    mine = sorted((s, e) for n, s, e in grants if n == name)
    tail_s = 0.0
    for c in cals:
        if sa <= c["t"] <= b:
            before_c = [(s, e) for s, e in mine if s < c["t"]]
            if before_c:
                s, e = before_c[-1]
                tail_s += max(0.0, min(e, b) - max(s + (e - s) / 2, sa))
    f = tail_s / g if g > 0 else 0.0
    real_ord = (real - f) / (1 - f) if real is not None and f < 1 else None
    return dict(kind=kind, res=res, case=case, path=path, client=name, cap=cap, real=real,
                real_ord=real_ord, cal_share=f,
                real_json=json_real, real_all=speed_in_grants(steps, grants, name, bare, a, b),
                n=n, **est)


def category(settings, kind):
    if kind == "cap":
        return "lone" if settings.get("lone_turns") else "cap100"
    return "shared" if settings.get("shared_turns") else "turns100"


def results_with_logs(logs):
    """(result name, its JSON, its extracted logs' folder) for each result under `logs`."""
    for ldir in sorted(glob.glob(os.path.join(logs, "*"))):
        res = os.path.basename(ldir)
        jf = os.path.join(RESULTS, res + ".json")
        if res.startswith(PREFIXES) and os.path.exists(jf):
            yield res, json.loads(read_text(jf)), ldir


def case_tag(case):
    """A pairs case's log files' prefix (bench/paths.py)."""
    return "pairs-" + case.replace(" ", "").replace("/", "-").replace("+", "-")


def pairs_rows(res, d, ldir):
    rows = []
    seen = set()
    for p in d.get("pairs") or []:
        if p["window_s"] != 10 or "capped" not in p["case"]:
            continue
        case = p["case"]
        kept = kept_pair(ldir, p)
        if kept is None or not os.path.exists(f"{kept[0]}-schd.log") or case in seen:
            continue
        seen.add(case)
        tag, grants, steps = kept
        schd = read_text(f"{tag}-schd.log")
        if not steps:
            continue
        t0 = max(s[0][0] for s in steps.values())
        t_end = min(s[-1][0] for s in steps.values())
        a = t0 + 1.0
        if "edited_at_s" in p:
            a = t0 + p["edited_at_s"] + (p.get("edit_applied_ms") or 0) / 1e3
        caps = {c["name"]: c["target"] for c in p["clients"]}
        idle = max(0.0, 1.0 - sum(caps.values()))
        cat = category(d["settings"], "pair")
        for c in p["clients"]:
            if c["name"] not in steps or not c.get("granted"):
                continue
            bare = c.get("bare_rate") or p["bare_rate"]
            r = row(cat, res, case, p["path"], c["name"], c["target"], schd, steps[c["name"]],
                    grants, bare, a, t_end, c["mean"] / c["granted"], idle,
                    bool(d["settings"].get("shared_turns")))
            if r:
                rows.append(r)
    return rows


def cap_rows(res, d, ldir):
    rows = []
    for path, v in (d.get("paths") or {}).items():
        if not isinstance(v, dict) or not v.get("cap_work_per_granted_s"):
            continue
        schd_f = os.path.join(ldir, f"cap-{path}-schd.log")
        if not os.path.exists(schd_f):
            continue
        schd = read_text(schd_f)
        grants = json.loads(read_text(os.path.join(ldir, f"cap-{path}-grants.json")))
        steps = read_steps(os.path.join(ldir, f"cap-{path}-steps.jsonl"))
        cap = v["cap_target"]
        r = row(category(d["settings"], "cap"), res, f"cap {cap}", path, "cap", cap, schd,
                steps, grants, v["cap_bare_rate"], steps[0][0], steps[-1][0],
                v["cap_work_per_granted_s"], 1.0 - cap, bool(d["settings"].get("lone_turns")))
        if r:
            r["charged_json"] = v.get("cap_charged_per_granted_s")
            rows.append(r)
    return rows


def alike_points(rows, logs):
    """Capped pairs: each client's tails in its last calibration line read alone ("own",
    4trim) or with those of the others in its case whose grants cost within
    ALIKE_COST_SPREAD: the mean of the latest 4 of each but the fastest of all, and
      "pooled"     as much more as the newest tail of all reads over its own client's mean
                   (gem-schd's rule in shared turns 2026-12-07 11:40-22:40);
      "newest-all" or the newest tail of all where slower (the rule tried and reverted
                   in 49df44d: whoever calibrated last set everyone's cost);
      "own-heat"   as much more as its own newest tail reads over its own mean;
      "no-heat"    nothing more (gem-schd's since: speed._pooled_cost);
      "own-newest" or its own newest tail where slower;
    in points of share off the cap, keyed by card, kind and rule.  Not weighted over the steady
    part, and no age or graphs rule."""
    by_key = {(r["res"], r["case"], r["client"]): r for r in rows}
    out = {}
    for res, d, ldir in results_with_logs(logs):
        for p in d.get("pairs") or []:
            if p["window_s"] != 10 or "capped" not in p["case"] or "," in p["path"]:
                continue
            schd_f = os.path.join(ldir, f"{case_tag(p['case'])}-schd.log")
            if not os.path.exists(schd_f):
                continue
            schd = read_text(schd_f)
            last = {}
            for c in p["clients"]:
                lines = [x for x in cal_lines(schd, c["name"])
                         if x["by"] == "work" and x["tails"] and x["g"]]
                if lines:
                    last[c["name"]] = lines[-1]
            for name, mine in last.items():
                r = by_key.get((res, p["case"], name))
                if r is None or not r["real"]:
                    continue
                group = [x for x in last.values()
                         if max(x["g"], mine["g"]) <= ALIKE_COST_SPREAD * min(x["g"], mine["g"])]
                pooled = statistics.fmean(sorted(
                    t for x in group for t in believable(x["tails"])[-4:])[1:])
                newest = believable(max(group, key=lambda x: x["t"])["tails"])
                own = believable(mine["tails"])
                bound = 1.0 if mine["wait"] is None else min(mine["wait"] / GPU_BOUND, 1.0)
                for k, cost in (
                        ("own", _tails_mean(own)),
                        ("pooled", pooled + newest_where_slower(newest) - _tails_mean(newest)),
                        ("newest-all", max(pooled, newest[-1])),
                        ("own-heat", pooled + max(own[-1] - _tails_mean(own), 0.0)),
                        ("no-heat", pooled),
                        ("own-newest", max(pooled, own[-1]))):
                    fast = min(max(cost / mine["g"], 1.0), 2.0)
                    speed = 1.0 + (fast - 1.0) * bound
                    key = (res.split("-")[0], r["kind"], k)
                    out.setdefault(key, []).append(100 * r["cap"] * (r["real"] / speed - 1))
    return out


def read_text(path: str) -> str:
    with open(path, errors="replace") as f:
        return f.read()


def main():
    verbose = "--verbose" in sys.argv
    logs = sys.argv[sys.argv.index("--logs") + 1] if "--logs" in sys.argv else LOGS
    rows = []
    for res, d, ldir in results_with_logs(logs):
        rows += pairs_rows(res, d, ldir) + cap_rows(res, d, ldir)
    keys = ["logged", *ESTIMATORS]
    if "--only" in sys.argv:  # a substring of the result name (e.g. 20261207, h200)
        sub = sys.argv[sys.argv.index("--only") + 1]
        rows = [r for r in rows if sub in r["res"]]
    if verbose or "--table" in sys.argv:
        print(f"{'kind':8} {'run':13} {'case':26} {'path':11} {'cl':3} {'cap':4} {'n':>2} "
              f"{'real':>6} {'rJSON':>6} " + " ".join(f"{k:>6}" for k in keys))
        for r in rows:
            run = r["res"].replace("h100-80gb-hbm3-", "H").replace("h200-", "h200-")[:13]
            print(f"{r['kind']:8} {run:13} {r['case'][:26]:26} {r['path'][:11]:11} "
                  f"{r['client']:3} {r['cap']:<4} {r['n']:>2} {r['real']:6.3f} "
                  f"{r['real_json']:6.3f} " + " ".join(f"{r[k]:6.3f}" for k in keys))
    print(f"\n{len(rows)} client-runs")
    print("calibration tails' share of granted time: " + ", ".join(
        f"{k} {statistics.fmean(r['cal_share'] for r in rows if r['kind'] == k):.3f}"
        for k in ("shared", "turns100", "lone", "cap100") if any(r['kind'] == k for r in rows)))
    for ref in ("real", "real_ord", "real_json"):
        print(f"\n=== error = estimator - {ref} (speed units; +: charged more than its grants did)")
        for kind in ("shared", "turns100", "lone", "cap100"):
            sel = [r for r in rows if r["kind"] == kind and r[ref]]
            if not sel:
                continue
            print(f"-- {kind}: {len(sel)} client-runs")
            for k in keys + [k + "+f" for k in keys[1:]]:
                errs = [r[k] - r[ref] for r in sel]
                worst = max(errs, key=abs)
                print(f"   {k:7} mean {statistics.fmean(errs):+.3f}  MAE "
                      f"{statistics.fmean(abs(e) for e in errs):.3f}  worst {worst:+.3f}  "
                      f"rms {statistics.fmean(e * e for e in errs) ** 0.5:.3f}")
    print("\n=== points of share off the cap, cap x (real / estimator - 1), over the steady part"
          " (+: over its cap)")
    for card in ("h100", "h200"):
        sel = [r for r in rows if r["res"].startswith(card) and r["real"]]
        if not sel:
            continue
        print(f"-- {card}: {len(sel)} client-runs")
        for k in keys:
            pts = [100 * r["cap"] * (r["real"] / r[k] - 1) for r in sel]
            print(f"   {k:8} mean {statistics.fmean(pts):+.2f}  past 1: "
                  f"{sum(abs(p) > 1 for p in pts):3}  past 2: {sum(abs(p) > 2 for p in pts):3}  "
                  f"worst {max(pts, key=abs):+.1f}")
    print("\n=== capped pairs, the last calibration line's tails alone or with the alike"
          " neighbours' (alike_points says which rule is gem-schd's), points of share off the cap")
    for (card, kind, k), pts in sorted(alike_points(rows, logs).items()):
        rms = statistics.fmean(p * p for p in pts) ** 0.5
        print(f"   {card:5} {kind:8} {k:10} n {len(pts):3}  mean {statistics.fmean(pts):+.2f}  "
              f"rms {rms:.2f}  past 2: {sum(abs(p) > 2 for p in pts):3}  "
              f"worst {max(pts, key=abs):+.1f}")
    if "--csv" in sys.argv:
        import csv
        out = sys.argv[sys.argv.index("--csv") + 1]
        with open(out, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[*rows[0].keys(), "charged_json"],
                               extrasaction="ignore")
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
