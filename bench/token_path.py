"""A token's way between the scheduler, the pod manager and the hook, from their debug lines.

All three stamp their debug lines with CLOCK_MONOTONIC seconds (`[123.456789]`), so on one host
each hop can be timed one way:

  down: the scheduler grants -> the pod manager has it -> the hook has it
  up:   the hook asks -> the pod manager asks the scheduler -> the scheduler has the request

A capped client is charged from the grant to the request that returns the token, and can use
only the time between its own receipt and its own request: what the two differ by, per token,
is time it pays for and cannot use (the 'down + up' below).
"""

from __future__ import annotations

import bisect
import itertools
import re
import statistics

STAMP = r"\[(\d+\.\d+)\] "
SCHD_GRANT = re.compile(STAMP + r"\[[^]]+\] token granted for")
SCHD_ASKED = re.compile(STAMP + r"\[[^]]+\] asks for a token")
PMGR_GOT = re.compile(STAMP + r"\[[^]]+\] token from the scheduler")
PMGR_ASKED = re.compile(STAMP + r"\[[^]]+\] asked the scheduler for a token")
HOOK_GOT = re.compile(STAMP + r"token: ")
HOOK_ASKED = re.compile(STAMP + r"asking for a token")

MAX_HOP_S = 0.05  # a later line than this is not the same token's


def stamps(regex: re.Pattern[str], text: str) -> list[float]:
    return sorted(float(m.group(1)) for m in regex.finditer(text))


def chains(starts: list[float], *stages: list[float]) -> list[list[float]]:
    """Each start followed through the stages (each time the first one at or after the last,
    within MAX_HOP_S): the hop times in ms, for the starts followed to the end."""
    out = []
    for t in starts:
        times = [t]
        for stage in stages:
            i = bisect.bisect_left(stage, times[-1])
            if i == len(stage) or stage[i] - times[-1] > MAX_HOP_S:
                break
            times.append(stage[i])
        else:
            out.append([(b - a) * 1000 for a, b in itertools.pairwise(times)])
    return out


def summary(values: list[float]) -> dict:
    if not values:
        return {"n": 0}
    v = sorted(values)
    return {"n": len(v), "p10_ms": round(v[len(v) // 10], 3),
            "p50_ms": round(statistics.median(v), 3), "p90_ms": round(v[9 * len(v) // 10], 3)}


def token_path(schd_log: str, pmgr_log: str, hook_log: str) -> dict:
    """Per hop, the one-way times (ms) of every token and request that could be followed."""
    grant, schd_asked = stamps(SCHD_GRANT, schd_log), stamps(SCHD_ASKED, schd_log)
    pmgr_got, pmgr_asked = stamps(PMGR_GOT, pmgr_log), stamps(PMGR_ASKED, pmgr_log)
    hook_got, hook_asked = stamps(HOOK_GOT, hook_log), stamps(HOOK_ASKED, hook_log)
    down = chains(grant, pmgr_got, hook_got)
    up = chains(hook_asked, pmgr_asked, schd_asked)
    whole_down, whole_up = [sum(c) for c in down], [sum(c) for c in up]
    return {
        "down_schd_to_pmgr": summary([c[0] for c in down]),
        "down_pmgr_to_hook": summary([c[1] for c in down]),
        "down_schd_to_hook": summary(whole_down),
        "up_hook_to_pmgr": summary([c[0] for c in up]),
        "up_pmgr_to_schd": summary([c[1] for c in up]),
        "up_hook_to_schd": summary(whole_up),
        "down_plus_up_p50_ms": (round(statistics.median(whole_down)
                                      + statistics.median(whole_up), 3)
                                if down and up else None),
    }
