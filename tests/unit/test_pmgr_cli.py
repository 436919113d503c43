"""The daemons' options that reach their cores (gem-pmgr, gem-schd)."""

import pytest

from gemini.cli import pmgr


def test_timing_tokens_from_their_grant_is_off_unless_asked_by_flag_or_environment(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_TIME_FROM_GRANT", raising=False)
    assert not pmgr.build_parser().parse_args([]).time_from_grant
    assert pmgr.build_parser().parse_args(["--time-from-grant"]).time_from_grant
    monkeypatch.setenv("GEMINI_TIME_FROM_GRANT", "1")
    assert pmgr.build_parser().parse_args([]).time_from_grant


@pytest.mark.parametrize("flag", ["--quota", "--window", "--grace", "--um-min-quota",
                                  "--oversubscription", "--short-window"])
@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_gem_schd_takes_no_endless_or_undefined_number(
        flag: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    """(`-q inf` started a scheduler whose every token was endless, `--um-min-quota inf` one
    whose UM clients' were.)"""
    from gemini.cli import schd

    with pytest.raises(SystemExit) as exit_info:
        schd.build_parser().parse_args([f"{flag}={value}"])
    assert exit_info.value.code == 2
    assert f"{value!r} is not a finite number" in capsys.readouterr().err


@pytest.mark.parametrize("field", ["min_quota_s", "oversubscription"])
def test_a_um_policy_takes_no_endless_number(field: str) -> None:
    from gemini.core.um import UmPolicy

    with pytest.raises(ValueError, match="finite"):
        UmPolicy(**{field: float("inf")})
