"""Where a pair's overuse comes from: tokens that end after the next holder's began.

  python3 bench/handovers.py LOGS.tar[.xz] [--over-ms 1.0]
  python3 bench/handovers.py LOGS.tar[.xz] --deliveries
  python3 bench/handovers.py LOGS.tar[.xz] --late [--over-ms 1.0]

For each case of clients that took turns (`pairs-<case>-<client>.log`, the hook's debug log
that `bench/paths.py --keep-logs` keeps for pairs and trios; clients of one process), and each
client in it: its tokens as its hook saw them (`token: Q ms` at its receipt, so its end is the
receipt plus Q), the overuse its hook measured for each (`token end: overuse X ms`), and, for
each token handed over (the next token any client of the case received was another's), its
overlap with that one: this token's end by its own hook's clock less the next one's receipt by
its hook's (CLOCK_MONOTONIC, one host).  A positive overlap: the next holder's work could reach
the GPU before this token had ended.  Printed for the tokens whose overuse is over --over-ms
and for the rest apart (count, overlap p10 / p50 / p90 in ms), as one JSON object.

--deliveries: instead, how long each client's grants took to reach its pod manager, from the
pod managers' logs (`made X ms before`; before 2026-12-05 04:00, `granted X ms before`): count
and p50 / p90 / max in ms, per case and client.  `gem-schd --hand-over-at-arrival` waits that
long (its median, at most 2 ms) at each hand-over made at a grant's end.

--late: instead, for each client, how its tokens whose overuse was over --over-ms came: their
grant late from the scheduler (LATE_MS past its median), their reply late from the pod manager
to its hook, both, or neither.  On an H100 whose grants came 1.5-3.5 ms late 2-3 % of the time
(2026-12-06 17:15-17:19, `…-171546-` and `…-171721-paths-logs.tar.xz`), 31, 9, 5 and 4 of the
tokens over 1 ms (the journal, "Late grants and late replies cut"); since then the pod manager
and the hook cut a token that came late (podmanager.token_start, gem_roundtrip_late_ns).

Why: on the H200 (2026-12-04 16:27, `…-162742-paths-caps-60s-pairs-solo-tc-logs.tar.xz`) the
pairs' overuse p99 read 2.5-2.7 ms against 0.1-0.5 for a client capped alone, each from 2-6 %
of each client's tokens.  Those tokens' overlaps had a median of 0.37-0.53 ms, the others'
-0.12 to -0.01: a grant that reached its hook later than the next holder's reached its own
(1.09 against 0.46 ms after the scheduler booked them, in one) runs on past the next holder's
start.  Likely, as that token's markers read: the GPU, which time-slices the two processes'
contexts, gives the newcomer a whole time slice before the last of the first one's queue, and
that last part is read, and charged, some 2 ms late.
"""

from __future__ import annotations

import argparse
import bisect
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from common import pct
from high_seconds import read_logs

# (A token whose reply came late says how much of it the hook gave up: its end is that sooner.)
TOKEN = re.compile(r"\[(\d+\.\d+)\] token: ([\d.]+) ms(?:.*?; came [\d.]+ ms after it was sent: "
                   r"([\d.]+) ms of it gone)?")
TOKEN_END = re.compile(r"\[(\d+\.\d+)\] token end: overuse ([\d.]+) ms")
# A pairs case's hook log, of a client of one process (`pairs-0.3-0.7-a.log`; a client of
# several, `...-a0.log`, shares its tokens among them, and is not read)
HOOK_LOG = re.compile(r"^(?P<case>pairs-.+)-(?P<client>[a-z])\.log$")
# A token's end line comes when its tracker has read it, after the end: the first one after
# the end, less this, is that token's.
END_SLACK_S = 0.002


# A pod manager's debug line at each token: how long after the scheduler made it
MADE = re.compile(r"(?:made|granted) ([\d.]+) ms before")
PMGR_GOT = re.compile(r"\[(\d+\.\d+)\] \[[^]]+\] token from the scheduler: [\d.]+ ms, "
                      r"(?:made|granted) ([\d.]+) ms before")
# --late: a grant this much later than its client's median, or a reply that took this long
# from the pod manager to the hook (usually 0.14-0.20 ms on the H100), came late.
LATE_MS = 0.5
STEP_TIME = re.compile(r'"t": ([\d.]+)')  # a steps file's first sample: its measured run's start
# --late's verdict on a token: (its grant late from the scheduler, its reply late to the hook)
LATE_KIND = {(True, False): "from_the_scheduler", (False, True): "to_the_hook",
             (True, True): "both", (False, False): "neither"}
PMGR_LOG = re.compile(r"^(?P<case>pairs-.+)-pmgr-(?P<client>[^.]+)\.log$")


def tokens(text: str) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """A hook log's tokens, (receipt, what it ran for: its quota less what a late reply gave
    up) in seconds, and its token ends, (when written, overuse ms)."""
    got = [(float(m[1]), (float(m[2]) - float(m[3] or 0.0)) / 1000) for m in TOKEN.finditer(text)]
    ends = [(float(m[1]), float(m[2])) for m in TOKEN_END.finditer(text)]
    return got, ends


def token_overuses(text: str) -> list[tuple[float, float, float]]:
    """(receipt s, quota s, overuse ms) of each token of a hook log that has an end line: the
    first one, not taken by an earlier token, from END_SLACK_S before its end on, and before
    its next token's end (a token handed back early, or unmeasured, may have none)."""
    got, ends = tokens(text)
    end_times = [t for t, _ in ends]
    out = []
    taken = 0  # end lines before this one belong to earlier tokens
    for k, (receipt, quota) in enumerate(got):
        later = got[k + 1][0] + got[k + 1][1] if k + 1 < len(got) else float("inf")
        j = max(bisect.bisect_left(end_times, receipt + quota - END_SLACK_S), taken)
        if j >= len(ends) or end_times[j] >= later:
            continue
        taken = j + 1
        out.append((receipt, quota, ends[j][1]))
    return out


def overlaps(mine: str, others: list[str]) -> list[tuple[float, float]]:
    """(overlap s, overuse ms) of each token in `mine` handed over: the next token any client
    received was another's."""
    receipts = sorted([(t, False) for t, _ in tokens(mine)[0]]
                      + [(t, True) for text in others for t, _ in tokens(text)[0]])
    times = [t for t, _ in receipts]
    out = []
    for receipt, quota, overuse in token_overuses(mine):
        i = bisect.bisect_right(times, receipt)
        if i < len(receipts) and receipts[i][1]:  # (another client's: a hand-over)
            out.append((receipt + quota - times[i], overuse))
    return out


def summary(values: list[float]) -> dict:
    if len(values) < 3:
        return {"tokens": len(values)}
    deciles = statistics.quantiles(values, n=10)
    return {"tokens": len(values), "overlap_ms_p10": round(1e3 * deciles[0], 3),
            "overlap_ms_p50": round(1e3 * deciles[4], 3),
            "overlap_ms_p90": round(1e3 * deciles[8], 3)}


def case_overlaps(logs: dict[str, str]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """Per pairs case and client, `overlaps` of its tokens against its neighbours'."""
    cases: dict[str, dict[str, str]] = defaultdict(dict)
    for name, text in logs.items():
        if (m := HOOK_LOG.match(name)) and TOKEN.search(text):
            cases[m["case"]][m["client"]] = text
    return {case: {client: overlaps(text, [t for c, t in clients.items() if c != client])
                   for client, text in sorted(clients.items())}
            for case, clients in sorted(cases.items()) if len(clients) >= 2}


def split_summary(rows: list[tuple[float, float]], over_ms: float) -> dict:
    """`summary` of the overlaps of the tokens whose overuse was over `over_ms`, and of the rest."""
    return {f"overuse_over_{over_ms:g}_ms": summary([o for o, ms in rows if ms > over_ms]),
            "the_rest": summary([o for o, ms in rows if ms <= over_ms])}


def handovers(logs: dict[str, str], over_ms: float) -> dict:
    return {case: {client: split_summary(rows, over_ms) for client, rows in clients.items()}
            for case, clients in case_overlaps(logs).items()}


def deliveries(logs: dict[str, str]) -> dict[str, dict[str, dict]]:
    """Per pairs case and client, its grants' delivery to its pod manager (ms)."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for name, text in sorted(logs.items()):
        if (m := PMGR_LOG.match(name)) is None:
            continue
        made = [float(v) for v in MADE.findall(text)]
        row: dict = {"grants": len(made)}
        if len(made) >= 3:  # (nearest rank: quantiles() extrapolated a p90 past the max)
            row |= {"made_ms_p50": round(statistics.median(made), 3),
                    "made_ms_p90": round(pct(made, 0.9), 3), "made_ms_max": round(max(made), 3)}
        out[m["case"]][m["client"]] = row
    return dict(out)


def late_tokens(logs: dict[str, str], over_ms: float) -> dict[str, dict[str, dict]]:
    """Per pairs case and client, how its tokens whose overuse was over `over_ms` came: their
    grant LATE_MS or more later than its median from the scheduler, or their reply LATE_MS or
    more from the pod manager to the hook (its receipt by the hook less the pod manager's of
    the grant it shares), both, or neither.  Only the tokens of its measured run, where its
    steps file says when that began (`...-<client>-steps.jsonl`): before it, a program that
    compiles and tunes its kernels runs some long ones past its tokens whichever way they
    came."""
    out: dict[str, dict[str, dict]] = defaultdict(dict)
    for name, text in sorted(logs.items()):
        if (m := HOOK_LOG.match(name)) is None:
            continue
        pmgr = logs.get(f"{m['case']}-pmgr-{m['client']}.log", "")
        got = [(float(g[1]), float(g[2])) for g in PMGR_GOT.finditer(pmgr)]
        if not got:
            continue
        median = statistics.median(ms for _, ms in got)
        at = [t for t, _ in got]
        steps = STEP_TIME.search(logs.get(f"{m['case']}-{m['client']}-steps.jsonl", ""))
        measured_from = float(steps[1]) if steps else float("-inf")
        row = {"grants": len(got), "made_ms_p50": round(median, 3),
               **dict.fromkeys(LATE_KIND.values(), 0)}
        for receipt, _, overuse in token_overuses(text):
            i = bisect.bisect_right(at, receipt) - 1
            if overuse <= over_ms or i < 0 or receipt < measured_from:
                continue
            late = (got[i][1] - median >= LATE_MS, (receipt - got[i][0]) * 1e3 >= LATE_MS)
            row[LATE_KIND[late]] += 1
        out[m["case"]][m["client"]] = row
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("logs", type=Path, help="a bench/paths.py --keep-logs archive")
    p.add_argument("--over-ms", type=float, default=1.0)
    p.add_argument("--deliveries", action="store_true",
                   help="the grants' delivery to the pod managers instead (see above)")
    p.add_argument("--late", action="store_true",
                   help="how the tokens over --over-ms came instead (see above)")
    args = p.parse_args(argv)
    logs = read_logs(args.logs)
    got = deliveries(logs) if args.deliveries else late_tokens(logs, args.over_ms) \
        if args.late else handovers(logs, args.over_ms)
    print(json.dumps(got, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
