"""gem-pmgr's options that reach its core."""

import pytest

from gemini.cli import pmgr


def test_timing_tokens_from_their_grant_is_off_unless_asked_by_flag_or_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_TIME_FROM_GRANT", raising=False)
    assert not pmgr.build_parser().parse_args([]).time_from_grant
    assert pmgr.build_parser().parse_args(["--time-from-grant"]).time_from_grant
    monkeypatch.setenv("GEMINI_TIME_FROM_GRANT", "1")
    assert pmgr.build_parser().parse_args([]).time_from_grant
