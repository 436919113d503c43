"""What a capped run's highest seconds are made of (issue 12: "≤ limit + 5 points over any 1 s").

  python3 bench/high_seconds.py RESULTS-paths.json [--logs LOGS.tar[.xz]] [--path P] [--top N]
                                [--lowest | --calibrations] [--self]

For each capped run whose logs `bench/paths.py --keep-logs` kept (`cap-P-grants.json`, the
scheduler's grants as they ran, each to its real end; `cap-P-schd.log`, its debug lines; and
`cap-P-steps.jsonl`, the program's progress; all stamped with CLOCK_MONOTONIC), the N highest
1 s windows of work ÷ bare, sliding by 50 ms as paths.py slides them, each with what the
scheduler granted in it: the grants (how many, and any calibration with its length), the
seconds granted, the work per granted second, and the speed its latest calibration said by
then (the scheduler's "calibrated: speed" line).  A
window over its cap with the granted seconds at the cap is a speed charged too low; one with
more granted is the windows' allowance.  The logs default to the paths file's
`-logs.tar.xz` (or `.tar`) beside it; the bare rate is the paths file's `cap_bare_rate` (with
--self, the capped process's own rate once its cap was lifted, `cap_self_rate`, where kept).

With --calibrations, each calibration instead, with what was granted and done in the second
before it, in the second from its start, and in the second after that: where its pay-back
fell (the lowest sliding seconds of a cap alone come just before one).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paths import SLIDE_STEP_S, shares, window_list

CALIBRATED = re.compile(r"\[(\d+\.\d+)\] \[([^]]+)\] calibrated: speed ([\d.]+)")
# A grant this many times a run's median grant or longer is a calibration: alone, as in
# paths.py's capped runs, the others are paced grants of the cap's part of a turn (40 ms at
# 0.4), a little longer where an answer came late; a calibration at 0.4 is 100-125 ms long.
# (A fixed 150 ms told none of those apart.)
CALIBRATION_OVER_MEDIAN = 1.5


@dataclass(frozen=True)
class Grant:
    start: float
    length_s: float

    @property
    def end(self) -> float:
        return self.start + self.length_s


def read_grants(text: str, client: str = "cap") -> list[Grant]:
    """The client's grants from paths.py's `-grants.json` ([name, start, end] each)."""
    return [Grant(start, end - start) for name, start, end in json.loads(text) if name == client]


def read_steps(text: str) -> list[tuple[float, float]]:
    """A worker's samples from paths.py's `-steps.jsonl`: (time, steps done) each."""
    return [(d["t"], d["steps"]) for d in map(json.loads, text.splitlines()) if d]


def read_speeds(text: str, client: str = "cap") -> list[tuple[float, float]]:
    """The speeds the client's calibrations said, as (time, speed), from the scheduler's debug
    lines."""
    return [(float(m[1]), float(m[3])) for m in CALIBRATED.finditer(text) if m[2] == client]


def calibration_min_s(grants: list[Grant]) -> float:
    """The shortest grant of this run that is a calibration (CALIBRATION_OVER_MEDIAN; the lower
    median: calibrations are the fewer)."""
    lengths = sorted(g.length_s for g in grants)
    return CALIBRATION_OVER_MEDIAN * lengths[(len(lengths) - 1) // 2] if lengths else float("inf")


def granted_in(grants: list[Grant], lo: float, hi: float) -> list[tuple[Grant, float]]:
    """The grants overlapping [lo, hi], each with the seconds of it inside."""
    return [(g, min(hi, g.end) - max(lo, g.start)) for g in grants if g.end > lo and g.start < hi]


def highest_windows(samples: list[tuple[float, float]], bare: float, grants: list[Grant],
                    speeds: list[tuple[float, float]], top: int = 5,
                    lowest: bool = False) -> list[dict]:
    """The `top` highest (or `lowest`) 1 s windows of work ÷ `bare` (from 1 s after the first
    sample, sliding by SLIDE_STEP_S as paths.cap_metrics does; at most one a second, so that
    one lump is not listed twenty times), each with what was granted in it, its calibrations
    apart."""
    t0, t_end = samples[0][0], samples[-1][0]
    calibration_s = calibration_min_s(grants)
    slide = window_list(t0 + 1.0, t_end, 1.0, SLIDE_STEP_S)
    works = shares(samples, slide, bare)
    windows = sorted(zip(works, (lo for lo, _ in slide), strict=True), reverse=not lowest)
    out: list[dict] = []
    taken: list[float] = []  # the starts of the windows listed
    for work, lo in windows:
        if len(out) >= top:
            break
        if any(abs(lo - other) < 1.0 for other in taken):
            continue
        taken.append(lo)
        inside = granted_in(grants, lo, lo + 1.0)
        granted = sum(s for _, s in inside)
        said = [v for t, v in speeds if t <= lo + 1.0]
        out.append({
            "at_s": round(lo - t0, 2), "work": round(work, 4), "granted_s": round(granted, 4),
            "work_per_granted_s": round(work / granted, 3) if granted > 0 else None,
            "grants": len(inside),
            "calibrations_ms": [round(g.length_s * 1000, 1) for g, _ in inside
                                if g.length_s >= calibration_s],
            "calibrated_speed": said[-1] if said else None})
    return out


def around_calibrations(samples: list[tuple[float, float]], bare: float,
                        grants: list[Grant]) -> list[dict]:
    """Each calibration from 1 s after the first sample to 2 s before the last, with the
    seconds granted and the work ÷ `bare` in the second before it ("before"), the second from
    its start ("holding") and the second after that ("after")."""
    t0, t_end = samples[0][0], samples[-1][0]
    calibration_s = calibration_min_s(grants)
    out: list[dict] = []
    for g in grants:
        if g.length_s < calibration_s or not t0 + 1.0 <= g.start <= t_end - 2.0:
            continue
        seconds = {"before": g.start - 1.0, "holding": g.start, "after": g.start + 1.0}
        row: dict = {"at_s": round(g.start - t0, 2), "length_ms": round(g.length_s * 1000, 1)}
        for part, lo in seconds.items():
            [work] = shares(samples, [(lo, lo + 1.0)], bare)
            granted = sum(inside for _, inside in granted_in(grants, lo, lo + 1.0))
            row[part] = {"work": round(work, 4), "granted_s": round(granted, 4)}
        out.append(row)
    return out


def read_logs(tar_path: Path, names: list[str] | None = None) -> dict[str, str]:
    """The texts of a `--keep-logs` archive (`.tar` or `.tar.xz`) by file name: those named,
    or all of them."""
    with tarfile.open(tar_path) as tar:
        found = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
        out = {}
        for name in found if names is None else names:
            member = found.get(name)
            f = tar.extractfile(member) if member is not None else None
            if f is not None:
                out[name] = f.read().decode(errors="replace")
        return out


def _logs_beside(paths_json: Path) -> Path | None:
    """`X.json`'s `X-logs.tar.xz` (or `.tar`): as paths.py writes them, and as committed with
    a tag after `-paths`."""
    stem = paths_json.name.removesuffix(".json")
    for suffix in ("-logs.tar.xz", "-logs.tar"):
        candidate = paths_json.with_name(stem + suffix)
        if candidate.exists():
            return candidate
    return None


def runs_with_logs(results_files: list[Path]) -> Iterator[tuple[Path, dict, dict[str, str]]]:
    """(file, its results, its logs' texts by name) of each results file with its logs beside
    it; the others are named on stderr and skipped."""
    for path in results_files:
        archive = _logs_beside(path)
        if archive is None:
            print(f"{path.name}: no logs beside it", file=sys.stderr)
            continue
        yield path, json.loads(path.read_text()), read_logs(archive)


def rows_of_runs(doc: str, argv: list[str] | None,
                 rows: Callable[[dict, dict[str, str]], dict],
                 lines: Callable[[str, dict], Iterator[str]]) -> int:
    """A reader's main: for each results file named in `argv` with its logs beside it
    (runs_with_logs), its `rows(results, logs)`, printed as one JSON object (--json) or as
    `lines(file name, rows)`."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("results", type=Path, nargs="+")
    p.add_argument("--json", action="store_true", help="one JSON object per results file")
    args = p.parse_args(argv)
    for path, results, logs in runs_with_logs(args.results):
        out = {"file": path.name, **rows(results, logs)}
        for line in [json.dumps(out)] if args.json else lines(path.name, out):
            print(line)
    return 0


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """A paths results file, its logs, and which paths' capped runs to read."""
    p.add_argument("paths_json", type=Path)
    p.add_argument("--logs", type=Path, default=None)
    p.add_argument("--path", action="append", default=None, help="a path's run (default: all)")


def kept_runs(args: argparse.Namespace, suffixes: tuple[str, ...],
              ) -> dict[str, tuple[dict, tuple[str | None, ...]]] | None:
    """Each capped run of `args.paths_json` (add_run_arguments) with its `cap-P<suffix>` logs'
    texts (None: not kept); None, said, where no logs are found (`args.logs` is set to them)."""
    results = json.loads(args.paths_json.read_text())
    args.logs = args.logs or _logs_beside(args.paths_json)
    if args.logs is None:
        print(f"no logs beside {args.paths_json} (bench/paths.py --keep-logs)", file=sys.stderr)
        return None
    runs = {name: row for name, row in results.get("paths", {}).items()
            if row.get("cap_bare_rate") and (args.path is None or name in args.path)}
    texts = read_logs(args.logs, [f"cap-{n}{suffix}" for n in runs for suffix in suffixes])
    return {n: (row, tuple(texts.get(f"cap-{n}{suffix}") for suffix in suffixes))
            for n, row in runs.items()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_run_arguments(p)
    p.add_argument("--top", type=int, default=5)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--lowest", action="store_true", help="the lowest windows instead")
    which.add_argument("--calibrations", action="store_true",
                       help="each calibration with the seconds around it instead")
    p.add_argument("--self", action="store_true", dest="own",
                   help="work ÷ the capped process's own rate once its cap was lifted "
                        "(cap_self_rate), where the run has one, not ÷ the bare median")
    args = p.parse_args(argv)
    runs = kept_runs(args, ("-grants.json", "-schd.log", "-steps.jsonl"))
    if runs is None:
        return 2
    report = {}
    for name, (row, (grants, schd, steps)) in runs.items():
        if grants is None or schd is None or steps is None:
            continue
        samples = read_steps(steps)
        rate, whose, what = judged_by(row, args.own)
        if args.calibrations:
            report[name] = around_calibrations(samples, rate, read_grants(grants))
            _print_calibrations(name, row, report[name], what)
            continue
        report[name] = highest_windows(samples, rate, read_grants(grants),
                                       read_speeds(schd), args.top, args.lowest)
        print(f"{name} ({what}, cap {row.get('cap_target')}):")
        for w in report[name]:
            cal = f", calibration {w['calibrations_ms']} ms" if w["calibrations_ms"] else ""
            print(f"  {w['at_s']:6.2f} s: work {w['work']:.3f}, granted {w['granted_s']:.3f} s "
                  f"in {w['grants']} grants{cal}, {w['work_per_granted_s']} of {whose} work "
                  f"per granted s, the latest calibration said {w['calibrated_speed']}")
    if not report:
        print(f"no capped run with its logs in {args.logs}", file=sys.stderr)
        return 2
    return 0


def judged_by(row: dict, own: bool) -> tuple[float, str, str]:
    """The rate a run's work is divided by, whose it is, and its words: the bare median's, or
    with `own` the capped process's own once its cap was lifted (bench/paths.py,
    cap_self_rate) where known."""
    if own and row.get("cap_self_rate"):
        rate = row["cap_self_rate"]
        return rate, "its", f"its own process {rate} steps/s uncapped"
    return row["cap_bare_rate"], "bare", f"bare {row['cap_bare_rate']} steps/s"


def _print_calibrations(name: str, row: dict, calibrations: list[dict], what: str) -> None:
    print(f"{name} ({what}, cap {row.get('cap_target')}), "
          "work / granted s in the second before each calibration, from its start, after:")
    for c in calibrations:
        parts = "  ".join(f"{c[part]['work']:.3f} / {c[part]['granted_s']:.3f}"
                          for part in ("before", "holding", "after"))
        print(f"  {c['at_s']:6.2f} s ({c['length_ms']:.0f} ms): {parts}")


if __name__ == "__main__":
    sys.exit(main())
