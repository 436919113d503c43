"""gemini status / top / trace / check-config for spatial partitions (issue 13)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gemini.cli.gemini import cmd_check_config
from gemini.core import config as cfg
from gemini.core.partitions import PartitionRouter
from gemini.core.scheduler import Timing
from gemini.core.status import render
from gemini.core.trace import TraceRecorder, chrome_trace
from gemini.core.wire import Request, RequestType

TEXT = "3\ntrain 0.5 1 4GiB sm=70@big\neval 0.5 1 2GiB sm=70@big\nweb 1 1 1GiB\n"


def busy_router(spatial: bool) -> PartitionRouter:
    router = PartitionRouter(cfg.parse_text(TEXT), Timing(), 0.0, spatial=spatial)
    for conn, name in enumerate(("train", "eval", "web"), start=1):
        router.on_request(conn, Request(name, 1, RequestType.QUOTA, (0.0, 10.0)), 0.0)
    return router


def table(text: str) -> dict[str, str]:
    """client -> its row, from a rendered table."""
    return {line.split()[0]: line for line in text.splitlines()[2:]}


def test_status_shows_each_clients_mode_and_every_token() -> None:
    text = render(busy_router(spatial=True).snapshot(0.05))
    head, columns = text.splitlines()[:2]
    assert head.endswith("token: web, big: train")
    assert columns.split()[-1] == "mode"
    rows = table(text)
    assert rows["train"].endswith("spatial big 70%")
    assert " held " in rows["train"] and " wait " in rows["eval"]
    assert rows["web"].endswith("time-sliced")


def test_status_without_mps_says_the_partition_is_time_sliced() -> None:
    rows = table(render(busy_router(spatial=False).snapshot(0.05), with_bars=True))
    assert "time-sliced (big 70%, no MPS)" in rows["train"]


def test_a_client_named_in_wide_characters_keeps_the_columns_in_line() -> None:
    """(Widths were counted in characters: a CJK name, two cells a character, pushed its row
    four cells right of the others.)"""
    from gemini.core.status import cells

    router = PartitionRouter(cfg.parse_text("2\n训练任务 0.3 1 1GiB\ninfer 0.3 1 1GiB\n"),
                             Timing(), 0.0)
    lines = render(router.snapshot(1.0)).splitlines()[1:]
    starts = {cells(line[:line.index("0.30")]) for line in lines[1:]}
    assert len(starts) == 1 and starts == {cells(lines[0][:lines[0].index("request")])}
    assert [cells(t) for t in ("训练", "กั", "a\u200bb", "e\u0301")] == [4, 1, 2, 1]


def test_status_of_a_v1_config_has_no_mode_column() -> None:
    router = PartitionRouter(cfg.parse_text("1\na 1 1 1\n"), Timing(), 0.0)
    head, columns = render(router.snapshot(1.0)).splitlines()[:2]
    assert head.endswith("token: -")
    assert "mode" not in columns


def test_status_shows_the_share_over_the_short_window_where_there_is_one() -> None:
    snap = busy_router(spatial=False).snapshot(0.05)
    snap["clients"][0]["share_short"] = 0.437  # type: ignore[index]
    columns = render(snap).splitlines()[1].split()
    assert columns[3:6] == ["share", "1", "s"]
    assert table(render(snap))["train"].split()[4] == "0.437"
    snap["short_window_s"] = 0.0
    assert render(snap).splitlines()[1].split()[3:5] == ["share", "quota"]


def test_trace_of_partitions_running_side_by_side() -> None:
    router = busy_router(spatial=True)
    recorder = TraceRecorder()
    recorder.add(router.snapshot(0.05)["history"])  # type: ignore[arg-type]
    intervals = recorder.intervals()
    assert {n for n, _, _ in intervals} == {"train", "web"}
    (train,) = [i for i in intervals if i[0] == "train"]
    (web,) = [i for i in intervals if i[0] == "web"]
    assert train[1] == web[1] == 0.0  # at the same time: two tokens
    events = chrome_trace(intervals)["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 2


def test_check_config_lists_partitions(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi: GPUs not checked
    conf = tmp_path / "r.txt"
    conf.write_text(TEXT)
    assert cmd_check_config([str(conf)]) == 0
    out = capsys.readouterr().out
    assert "  GPU 0: partitions (MPS) big 70%\n" in out
    assert "train: request 0.5, limit 1, memory 4,294,967,296 B (4.00 GiB), in partition big" in out
    conf.write_text(TEXT.replace("sm=70@big", "sm=70"))
    assert cmd_check_config([str(conf)]) == 1
    assert "the partitions take 140% of the SMs" in capsys.readouterr().err
