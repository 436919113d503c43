"""bench/handovers.py: a pair's tokens against the next holder's, from the hooks' logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import handovers
from paths import keep_logs


def hook_log(client: str, tokens: list[tuple[float, float, float | None]]) -> str:
    """(receipt s, quota ms, overuse ms written 2 ms after its end or None) each."""
    lines = []
    for at, quota, overuse in tokens:
        lines.append(f"gemini-hook[{client} 1] debug: [{at:.6f}] token: {quota:.3f} ms (asked)")
        if overuse is not None:
            end = at + quota / 1000 + 0.002
            lines.append(f"gemini-hook[{client} 1] debug: [{end:.6f}] token end: overuse "
                         f"{overuse:.3f} ms (charged)")
    return "\n".join(lines) + "\n"


def pair_logs() -> dict[str, str]:
    # a holds 30 ms of every 100, b the rest; three of b's grants reach b 0.5 ms before a's
    # token ends by a's clock (a overused 2.5 ms there), three 0.2 ms after (0.1 ms).
    a, b = [], []
    for i in range(6):
        start = 1.0 + i * 0.1
        early = i % 2 == 0
        a.append((start, 30.0, 2.5 if early else 0.1))
        b.append((start + 0.030 + (-0.0005 if early else 0.0002), 70.0, None))
    return {"pairs-0.3-0.7-a.log": hook_log("a", a), "pairs-0.3-0.7-b.log": hook_log("b", b),
            # (not a hook's log of a pair's client: no tokens, or a client of two processes)
            "pairs-0.3-0.7-schd.log": "[1.0] [a] token granted for 30.0 ms\n",
            "pairs-0.5-0.5ax2-a0.log": hook_log("a0", a), "cap-torch-eager.log": hook_log("c", a)}


def test_a_token_overlapped_by_the_next_holders_is_told_from_the_rest() -> None:
    got = handovers.handovers(pair_logs(), over_ms=1.0)
    assert list(got) == ["pairs-0.3-0.7"]
    a = got["pairs-0.3-0.7"]["a"]
    assert a["overuse_over_1_ms"]["tokens"] == 3 and a["the_rest"]["tokens"] == 3
    assert a["overuse_over_1_ms"]["overlap_ms_p50"] == 0.5
    assert a["the_rest"]["overlap_ms_p50"] == -0.2
    # b's tokens: each followed by a's next, 0.1 s after b's receipt less its 70 ms
    b = got["pairs-0.3-0.7"]["b"]
    assert b["overuse_over_1_ms"]["tokens"] == 0 and b["the_rest"]["tokens"] == 0  # (no ends)


def test_it_reads_a_kept_logs_archive(tmp_path: Path, capsys) -> None:
    archive = tmp_path / "x-logs.tar"
    keep_logs(archive, pair_logs())
    assert handovers.main([str(archive), "--over-ms", "2"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["pairs-0.3-0.7"]["a"]["overuse_over_2_ms"]["tokens"] == 3


def test_the_grants_delivery_is_read_from_the_pod_managers_logs(tmp_path: Path, capsys) -> None:
    made = [0.4, 0.5, 0.6, 0.7, 2.5]
    pmgr = "".join(f"[a] token from the scheduler: 30.000 ms, made {ms:.3f} ms before, "
                   "1 waiting\n" for ms in made)
    old = "[b] token from the scheduler: 70.000 ms, granted 0.900 ms before, 1 waiting\n" * 3
    archive = tmp_path / "x-logs.tar"
    keep_logs(archive, {**pair_logs(), "pairs-0.3-0.7-pmgr-a.log": pmgr,
                        "pairs-0.3-0.7-pmgr-b.log": old})
    assert handovers.main([str(archive), "--deliveries"]) == 0
    got = json.loads(capsys.readouterr().out)["pairs-0.3-0.7"]
    assert got["a"]["grants"] == 5 and got["a"]["made_ms_p50"] == 0.6
    assert got["a"]["made_ms_max"] == 2.5 and got["a"]["made_ms_p90"] <= 2.5
    assert got["b"] == {"grants": 3, "made_ms_p50": 0.9, "made_ms_p90": 0.9, "made_ms_max": 0.9}


def test_the_tokens_over_the_bound_are_told_by_how_late_they_came() -> None:
    """a's three tokens that overused 2.5 ms: the first's grant came 3 ms after it was made
    (its median 0.5), the second's reply reached its hook 2 ms after its pod manager had it,
    the third came on time; tokens before the measured run's start are not counted."""
    logs = pair_logs()
    came = {0: (3.0, 0.0001), 2: (0.5, 0.002), 4: (0.5, 0.0001)}  # made ms, to the hook s
    lines = []
    for i in range(6):
        receipt = 1.0 + i * 0.1
        made, hop = came.get(i, (0.5, 0.0001))
        lines.append(f"gem-pmgr DEBUG [{receipt - hop:.6f}] [a] token from the scheduler: "
                     f"30.000 ms, made {made:.3f} ms before, 1 waiting\n")
    logs["pairs-0.3-0.7-pmgr-a.log"] = "".join(lines)
    row = handovers.late_tokens(logs, over_ms=1.0)["pairs-0.3-0.7"]["a"]
    assert row == {"grants": 6, "made_ms_p50": 0.5, "from_the_scheduler": 1, "to_the_hook": 1,
                   "both": 0, "neither": 1}
    logs["pairs-0.3-0.7-a-steps.jsonl"] = '{"t": 1.05, "steps": 0.0}\n{"t": 1.06, "steps": 1.0}\n'
    row = handovers.late_tokens(logs, over_ms=1.0)["pairs-0.3-0.7"]["a"]
    assert (row["from_the_scheduler"], row["to_the_hook"], row["neither"]) == (0, 1, 1)
    assert "b" not in handovers.late_tokens(logs, over_ms=1.0)["pairs-0.3-0.7"]  # (no pmgr log)


def test_a_token_whose_reply_came_late_ends_as_much_sooner() -> None:
    """(Read as its quota, a token cut by its hook showed an overlap of 0.75 ms on the fake GPU
    that its hook's own end, 0.87 ms before the next receipt, did not have.)"""
    line = ("gemini-hook[b 1] debug: [75757.178728] token: 69.506 ms (asked for a 70.000 ms burst, "
            "reported 0.000 ms overuse; 1 process(es) share it; came 1.875 ms after it was sent: "
            "1.625 ms of it gone)\n"
            "gemini-hook[b 1] debug: [75757.300000] token: 30.000 ms (asked for a 30.000 ms burst, "
            "reported 0.000 ms overuse; 1 process(es) share it)\n")
    got, _ = handovers.tokens(line)
    assert [(t, round(q, 6)) for t, q in got] == [(75757.178728, 0.067881), (75757.3, 0.03)]
