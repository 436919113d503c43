"""bench/paths.py's pure helpers: the pair arithmetic (clients running different programs are
each judged against their own program's bare rate: issue 12, shares from work done), and the
overuse it reads from a hook's log."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import common
import paths

from tests.unit.steps import halves


def steady(rate: float, seconds: int) -> list[list[float]]:
    return [[t / 10, rate * t / 10] for t in range(seconds * 10 + 1)]


def test_each_client_is_judged_against_its_own_programs_bare_rate() -> None:
    samples = {"a": steady(30.0, 14), "b": steady(140.0, 14)}  # a: 30 of 100, b: 140 of 200
    entries = paths.pair_entries("0.3/0.7", samples, {"a": 0.3, "b": 0.7}, 0.0, 14.0,
                                 {"a": 100.0, "b": 200.0}, path="triton/jax")
    assert [e["window_s"] for e in entries] == [10, 1]
    for e in entries:
        assert e["path"] == "triton/jax" and e["bare_rate"] is None
        got = {c["name"]: (c["achieved"], c["bare_rate"]) for c in e["clients"]}
        assert got == {"a": (pytest.approx(0.3), 100.0), "b": (pytest.approx(0.7), 200.0)}


def test_one_program_for_all_keeps_one_bare_rate() -> None:
    entries = paths.pair_entries("0.3/0.7", {"a": steady(30.0, 14), "b": steady(70.0, 14)},
                                 {"a": 0.3, "b": 0.7}, 0.0, 14.0, 100.0)
    assert all(e["bare_rate"] == 100.0 and e["path"] == paths.PAIR_PATH for e in entries)
    assert all("bare_rate" not in c for e in entries for c in e["clients"])


def test_pair_paths_are_taken_in_turn() -> None:
    assert [paths.pair_path("triton,jax", i) for i in range(3)] == ["triton", "jax", "triton"]
    assert paths.pair_path("", 1) == paths.PAIR_PATH


def test_merge_keeps_pairs_of_different_programs_apart() -> None:
    one = {"case": "0.3/0.7", "window_s": 10, "path": "torch-eager", "clients": []}
    mixed = {**one, "path": "triton/jax"}
    merged = paths.merge_results({"pairs": [one]}, {"pairs": [mixed]})
    assert sorted(e["path"] for e in merged["pairs"]) == ["torch-eager", "triton/jax"]


def test_the_overuse_the_hook_reported_is_kept_beside_the_trackers() -> None:
    """A sync's charge of work no marker showed goes out with the next request, not as a
    tracker line: the per-token figures keep to the tracker, the reported ones show it."""
    hook = "gemini-hook[cap 1] debug:"
    log = "".join([
        f"{hook} [1.0] token end: overuse 0.116 ms (0.116 ms charged: what ran before our next "
        "token, less what a sync charged)\n",
        f"{hook} [1.1] token end: a sync saw our work run 169.066 ms past it "
        "(168.974 ms more than the markers showed)\n",
        f"{hook} [1.2] token: 50.000 ms (asked for a 50.000 ms burst, reported "
        "169.066 ms overuse; 1 process(es) share it)\n",
        f"{hook} [1.3] token end: overuse 0.2 ms (0.2 ms charged: what ran before our next "
        "token, less what a sync charged)\n",
        f"{hook} [1.4] token: 50.000 ms (asked for a 50.000 ms burst, reported "
        "0.2 ms overuse; 1 process(es) share it)\n",
    ])
    got = paths.overuse_of(log)
    assert got["overuse_samples"] == 2 and got["overuse_ms_max"] == 0.2
    assert got["overuse_reported_ms_max"] == 169.066
    assert got["overuse_reported_ms_sum"] == pytest.approx(169.266)


def test_a_capped_run_is_judged_on_every_1s_window_not_only_its_whole_seconds() -> None:
    """Work at 0.4 of bare, but nothing from 2.25 to 2.75 s and 3.25 to 3.75 s and full speed
    between: each whole second holds 0.35-0.40, a window from 2.25-2.75 s on holds 0.5."""
    def rate(t: float) -> float:
        if 2.25 <= t < 2.75 or 3.25 <= t < 3.75:
            return 0.0
        return 100.0 if 2.75 <= t < 3.25 else 40.0

    samples, steps = [[0.0, 0.0]], 0.0
    for i in range(1, 601):  # 6 s in 10 ms steps
        steps += rate((i - 1) / 100) / 100
        samples.append([i / 100, steps])
    m = paths.cap_metrics(samples, 100.0)
    assert max(m["per_second"]) == pytest.approx(0.4, abs=1e-6)
    assert m["cap_high1_sliding"] == pytest.approx(0.5, abs=1e-6)
    assert 2.25 - 1e-6 <= m["cap_high1_sliding_at_s"] <= 2.75 + 1e-6
    assert m["cap_low1_sliding"] == pytest.approx(0.2, abs=1e-6)
    assert "0.500 ❌ at 2.2 s / 0.200" in paths.markdown({"paths": {"triton": m}})
    # The worst 1 s error is judged over every window: 0.2 below 0.4, not 0.05 (whole seconds).
    assert m["cap_err1_max_pp"] <= 5.0 + 1e-6 and m["cap_err1_sliding_max_pp"] == 20.0
    assert "(sliding 20.0) ❌" in paths.markdown({"paths": {"triton": m}})


def test_a_pairs_1s_shares_are_judged_on_every_window_not_only_its_whole_seconds() -> None:
    """(Whole seconds of exactly 0.3 can hold halves at 0.5 and 0.1: judged on the seconds,
    71 of 211 pair clients of the H200's kept logs passed 5 points that every window fails.)"""
    samples = {"a": halves(0.5, 0.1, 14), "b": halves(0.5, 0.9, 14)}
    _, one = paths.pair_entries("0.3/0.7", samples, {"a": 0.3, "b": 0.7}, 0.0, 14.0, 100.0)
    a = {c["name"]: c for c in one["clients"]}["a"]
    assert a["error_pp_max"] == pytest.approx(0.0, abs=1e-6)
    assert a["error_pp_max_sliding"] == pytest.approx(20.0, abs=0.5)
    assert (a["low_sliding"], a["high_sliding"]) == (pytest.approx(0.1, abs=0.01),
                                                     pytest.approx(0.5, abs=0.01))
    table = paths.markdown({"pairs": [one]})
    assert "| 0.3/0.7 | " in table and "❌" in table


def test_the_table_names_the_bare_rate_a_capped_run_was_divided_by_where_it_differs() -> None:
    """Merged from two invocations, a row's solo runs and capped run may have different bare
    rates (a launch-bound loop: 493 and 662 steps/s on the H100, 2026-11-25)."""
    row = {"bare": {"median": 493.3}, "cap_bare_rate": 661.76, "cap_60s": 0.358}
    table = {"paths": {"launch-bound": row}}
    assert "| launch-bound | 493.3 (cap ÷ 661.8) |" in paths.markdown(table)
    row["cap_bare_rate"] = 494.0
    assert "| launch-bound | 493.3 |" in paths.markdown(table)


def test_the_hook_sources_digest_names_the_sources(tmp_path: Path) -> None:
    for top in common.HOOK_SOURCES:
        (tmp_path / top).mkdir(parents=True)
    (tmp_path / "csrc/hook/token.c").write_text("int a;\n")
    (tmp_path / "csrc/fake").mkdir()
    first = common.hook_sources_digest(tmp_path)
    (tmp_path / "csrc/fake/driver.c").write_text("not the hook\n")
    assert common.hook_sources_digest(tmp_path) == first
    (tmp_path / "csrc/hook/token.c").write_text("int b;\n")
    assert common.hook_sources_digest(tmp_path) != first
    (tmp_path / "csrc/hook/token.c").write_text("int a;\n")
    assert common.hook_sources_digest(tmp_path) == first
    (tmp_path / "csrc/hook/token.c").rename(tmp_path / "csrc/hook/lease.c")
    assert common.hook_sources_digest(tmp_path) != first


def test_a_hook_built_from_the_same_sources_is_reused_and_no_other(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/paths.py's build_hook compiles only where its own build of these sources is not
    the library there: a dry run costs no compile, and a library built since by other means
    (bench/run_all.py calls the script itself) or from other sources is never reused."""
    bench = tmp_path / "bench"
    bench.mkdir()
    builds = tmp_path / "builds"
    (bench / "build_hook.sh").write_text(  # (stands in for the compile: counts each build)
        f'echo x >> {builds}; printf "lib %s" "$(wc -l < {builds})" > "$1/libgemhook.so.1"\n'
        'echo "$1/libgemhook.so.1"\n')
    sources = {"digest": "aaaa"}
    monkeypatch.setattr(paths, "BENCH", bench)
    monkeypatch.setattr(paths, "BUILD", tmp_path / "build")
    monkeypatch.setattr(paths, "hook_sources_digest", lambda: sources["digest"])

    def built() -> int:
        return len(builds.read_text().splitlines())

    first = paths.build_hook()
    assert first["ok"] and "reused" not in first and built() == 1
    again = paths.build_hook()
    assert again["reused"] and again["path"] == first["path"] and built() == 1
    sources["digest"] = "bbbb"  # the sources changed
    assert "reused" not in paths.build_hook() and built() == 2
    (tmp_path / "build/libgemhook.so.1").write_text("built by other means, other size")
    assert "reused" not in paths.build_hook() and built() == 3
    assert paths.build_hook()["reused"] and built() == 3


def test_the_benches_take_a_built_hook_only_while_it_is_of_these_sources(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/pair_fake.py ran a hook left in bench/.build from sources hours older (no stamp
    was looked at): a library built there from other sources, or replaced since, is not taken,
    and the package's (`make build`) is."""
    sources = {"digest": "aaaa"}
    monkeypatch.delenv("GEMINI_BENCH_HOOK", raising=False)
    monkeypatch.setattr(common, "BUILD", tmp_path)
    monkeypatch.setattr(common, "hook_sources_digest", lambda: sources["digest"])
    from gemini.native import hook_library_path

    lib = tmp_path / "libgemhook.so.1"
    lib.write_text("a hook")
    assert common.hook_path() == hook_library_path()  # (no stamp)
    (tmp_path / "libgemhook.so.1.stamp").write_text(f"aaaa 1234 cc {common.library_id(lib)}")
    assert common.hook_path() == lib
    sources["digest"] = "bbbb"  # the sources changed since
    assert common.hook_path() == hook_library_path()
    sources["digest"] = "aaaa"
    lib.write_text("another hook, built by other means")
    assert common.hook_path() == hook_library_path()


def test_a_capped_runs_work_and_charge_per_granted_second_say_where_its_share_went() -> None:
    # H200, CuPy capped at 0.4 (2026-12-02 06:37): 0.394 of its bare work, granted 0.340 of
    # 30 s and charged 0.4 in all: a granted second did 1.160 and was charged 1.178.
    got = paths.per_granted_second(0.3944, 0.3396, 0.1782 * 0.3396 * 30.0, 30.0)
    assert got == {"cap_work_per_granted_s": pytest.approx(1.1614, abs=1e-4),
                   "cap_charged_per_granted_s": pytest.approx(1.1782, abs=1e-4)}
    assert paths.per_granted_second(0.39, 0.34, None, 30.0)["cap_charged_per_granted_s"] is None
    assert paths.per_granted_second(0.39, 0.0, 1.0, 30.0)["cap_work_per_granted_s"] is None
    row = {"cap_60s": 0.3944, "cap_15s": 0.39, **got}
    assert "a granted second did 1.161, charged 1.178" in paths.markdown({"paths": {"cupy": row}})


def test_the_speed_charge_over_a_run_is_read_between_the_polls_inside_it() -> None:
    from common import GrantTracer

    tracer = GrantTracer(port=1, period=60.0)  # (nothing listens: its one poll fails)
    tracer.stop()
    tracer._charges = [(t, {"cap": 0.05 * t}) for t in (0.5, 1.0, 2.0, 3.0, 3.5)]
    # polls at 1.0 and 3.0 inside [0.8, 3.2]: 0.1 s charged over 2 s, so 0.12 over 2.4
    assert tracer.speed_charged("cap", 0.8, 3.2) == pytest.approx(0.12)
    assert tracer.speed_charged("cap", 1.1, 1.9) is None  # (no two polls inside)
    assert tracer.speed_charged("other", 0.0, 4.0) is None


def test_a_capped_runs_grants_per_second_tell_a_held_cap_from_a_wandering_host() -> None:
    # 40 ms of every 100 ms for 3 s, the run measured from 0.05 s: whole seconds only.
    grants = [("cap", 0.1 * i, 0.1 * i + 0.04) for i in range(30)] + [("other", 0.0, 3.0)]
    got = paths.granted_per_second(grants, "cap", 0.05, 3.0)
    assert got == [pytest.approx(0.4, abs=1e-3)] * 2
    assert paths.granted_per_second(grants, "cap", 0.0, 0.5) == []
    row = {"cap_60s": 0.403, "cap_15s": 0.375, "cap_granted_per_second": [0.366, 0.4, None, 0.411]}
    assert "granted 0.366–0.411 of each second" in paths.markdown({"paths": {"jax": row}})


def test_a_bare_runs_own_seconds_say_how_close_its_capped_seconds_can_be_judged() -> None:
    """A host-paced loop's bare work moves by a third from one second to the next (H200,
    2026-12-03: a loop of tiny CUDA graphs, granted 0.400 of every second, did 0.35-0.54 of
    its bare work in them): its capped seconds are read beside that spread."""
    def run(rates: list[float]) -> dict:
        samples, steps = [[0.0, 0.0]], 0.0
        for i, rate in enumerate(rates):  # 10 samples a second, `rate` steps/s in second i
            for j in range(1, 11):
                steps += rate / 10
                samples.append([i + j / 10, steps])
        return {"samples": samples}

    # Seconds are read from RATE_SKIP_S on: [0.5, 1.5] and [1.5, 2.5] straddle the rates.
    seconds = paths.own_seconds([run([100, 100, 100]), run([100, 80, 120])], 100.0)
    assert seconds == pytest.approx([1.0, 1.0, 0.9, 1.0])
    assert paths.own_spread(seconds) == pytest.approx(0.1)
    assert paths.own_spread([]) is None
    row = {"cap_60s": 0.4, "cap_bare_1s_spread": 0.1}
    assert "its bare seconds ±10 % of its bare rate (4.0 pp at its cap)" in paths.markdown(
        {"paths": {"launch-bound": row}})


def test_a_capped_run_is_judged_against_its_own_process_uncapped_too() -> None:
    """A host-paced loop's processes differ by more than the cap's tolerance: beside the bare
    median, the capped shares are read against the same process once its cap was lifted."""
    cap = {"cap_15s": 0.36, "cap_60s": 0.35}
    got = paths.against_self(cap, bare=630.0, self_rate=567.0)  # this process: 0.9 of bare
    assert got == {"cap_self_rate": 567.0, "cap_self_over_bare": 0.9,
                   "cap_15s_self": pytest.approx(0.4), "cap_60s_self": pytest.approx(0.3889)}
    assert paths.against_self(cap, 630.0, None) == {}
    row = {"cap_target": 0.4, **cap, **got}
    assert "against its own process uncapped (0.900 of bare): 0.400 / 0.389" in paths.markdown(
        {"paths": {"launch-bound": row}})


def test_a_capped_runs_overuse_is_read_from_its_log_up_to_the_cap_lifted() -> None:
    log = ("gemini-hook[cap 1] debug: [10.000000] token: 40.000 ms\n"
           "gemini-hook[cap 1] warning: no stamp here\n"
           "gemini-hook[cap 1] debug: [10.040000] token end: overuse 0.100 ms\n"
           "gemini-hook[cap 1] debug: [12.000000] token end: overuse 9.000 ms\n")
    cut = paths.log_until(log, 11.0)
    assert cut == "".join(log.splitlines(keepends=True)[:3])
    assert paths.overuse_of(cut)["overuse_ms_max"] == 0.1
    assert paths.log_until(log, None) == log


def test_a_runs_overuse_is_read_from_its_measured_span_only() -> None:
    """(The warm-up's tokens counted too: one of them was a run's whole p99.)"""
    log = ("gemini-hook[a 1] debug: [9.000000] token end: overuse 5.200 ms\n"  # warm-up
           "gemini-hook[a 1] debug: [10.040000] token end: overuse 0.100 ms\n"
           "gemini-hook[a 1] warning: no stamp here\n"
           "gemini-hook[a 1] debug: [10.500000] token end: overuse 0.300 ms\n"
           "gemini-hook[a 1] debug: [31.000000] token end: overuse 7.000 ms\n")  # after it
    span = paths.log_between(log, 10.0, 30.0)
    assert paths.overuse_of(span)["overuse_ms_max"] == 0.3
    assert paths.overuse_of(paths.log_between(log, 10.0, None))["overuse_ms_max"] == 7.0


def test_percentiles_take_the_nearest_rank() -> None:
    """(One rank too high where q * n was whole: p99 of 100 values was their largest.)"""
    from common import pct

    assert pct(list(range(1, 101)), 0.99) == 99
    assert pct(list(range(1, 21)), 0.9) == 18
    assert pct([1, 2, 3, 4], 0.5) == 2
    assert (pct([5], 0.5), pct([1, 2, 3], 0.0), pct([1, 2, 3], 1.0)) == (5, 1, 3)


def test_a_hooked_run_that_failed_is_said_and_fails_the_row() -> None:
    """(Dropped from the ratios, one crash in five still read "alone at bare speed ✅".)"""
    bare = [{"rate": 1000.0}] * 5
    solo = [{"rate": 999.0}] * 2 + [{"error": "exit -11 (SIGSEGV)"}] + [{"rate": 999.0}] * 2
    failed = paths.failed_runs(bare, solo)
    assert failed["solo_failed"] == 1 and failed["bare_failed"] == 0
    assert "1 of 5 solo runs failed (exit -11" in failed["runs_failed_note"]
    row = {"solo_over_bare": 0.999, "solo_over_bare_min": 0.999, "solo_over_bare_max": 0.999,
           **failed}
    table = paths.markdown({"paths": {"torch-eager": row}})
    assert "0.9990 (0.9990–0.9990) ❌" in table and "1 of 5 solo runs failed" in table
    assert paths.failed_runs(bare, bare) == {}


def test_a_merge_keeps_a_new_capped_run_whose_uncapped_follow_up_failed() -> None:
    old = {"cap_60s": 0.42, "cap_15s": 0.43}
    new = {"cap_60s": 0.398, "cap_15s": 0.401, "cap_self_error": "worker exited"}
    assert paths.merge_row(old, new)["cap_60s"] == 0.398
    assert paths.merge_row(old, {"cap_error": "daemons did not start"})["cap_60s"] == 0.42


def test_a_merged_files_rows_say_when_and_with_which_hook_each_phase_was_measured() -> None:
    """(The merged file's date and hook were its last invocation's, also for rows of the day
    before.)"""
    day1 = {"date": "12-03 18:02", "hook_build": {"sources_sha256": "6e0e"},
            "paths": {"torch-eager": {"solo_over_bare": 0.9998, "cap_60s": 0.41}}}
    day2 = {"date": "12-04 16:27", "hook_build": {"sources_sha256": "2a1a"},
            "paths": {"torch-eager": {"cap_60s": 0.398}},
            "pairs": [{"case": "0.3/0.7", "window_s": 1, "clients": []}]}
    row = paths.merge_results(paths.merge_results(None, day1), day2)["paths"]["torch-eager"]
    assert row["solo_measured"] == {"date": "12-03 18:02", "hook_sources_sha256": "6e0e"}
    assert row["cap_measured"] == {"date": "12-04 16:27", "hook_sources_sha256": "2a1a"}
    assert row["cap_60s"] == 0.398 and row["solo_over_bare"] == 0.9998
    merged = paths.merge_results(None, day2)
    assert merged["pairs"][0]["measured"]["date"] == "12-04 16:27"


def test_a_capped_runs_first_second_is_one_of_its_windows() -> None:
    """(The sliding windows began a second in, and only they were judged: a first second at
    0.6 of a 0.4 cap passed.)"""
    samples, steps = [[0.0, 0.0]], 0.0
    for i in range(1, 601):  # 6 s in 10 ms steps, bare 100/s: 0.6 in the first second, then 0.4
        steps += 0.6 if i <= 100 else 0.4
        samples.append([i / 100, steps])
    m = paths.cap_metrics(samples, 100.0)
    assert m["cap_err1_sliding_max_pp"] == pytest.approx(20.0)
    assert "(sliding 20.0) ❌" in paths.markdown({"paths": {"triton": m}})


def test_a_file_merged_before_rows_were_stamped_gets_no_stamps_of_its_last_run() -> None:
    merged = {"date": "12-04 16:27", "hook_build": {"sources_sha256": "2a1a"},
              "commands": ["paths.py --only solo:torch-eager", "paths.py --only cap:torch-eager"],
              "paths": {"torch-eager": {"solo_over_bare": 0.9998, "cap_60s": 0.398}}}
    row = paths.stamped(merged)["paths"]["torch-eager"]
    assert "solo_measured" not in row and "cap_measured" not in row


def test_a_hooks_measures_give_its_gpu_time_per_launch() -> None:
    log = ("gemini-hook[a 1] debug: [1.0] measured 19.121 ms over 82 launches (0 graphs, "
           "0.000 ms); left out: 38 launches (0 graphs) after gaps, 82.099 ms, 0 (0) after holds\n"
           "gemini-hook[a 1] debug: [1.1] token end: overuse 0.065 ms (0.065 ms charged)\n"
           "gemini-hook[a 1] debug: [1.2] measured 20.993 ms over 94 launches (0 graphs, "
           "0.000 ms); left out: 35 launches (0 graphs) after gaps, 80.454 ms, 0 (0) after holds\n")
    got = paths.launch_cost_of(log)
    assert got == {"launch_cost_us": pytest.approx(1e3 * 40.114 / 176, abs=0.1)}
    assert paths.launch_cost_of("gemini-hook[a 1] debug: [1.0] token: 30.000 ms\n") == {}
    samples = {"a": halves(0.3, 0.3, 14), "b": halves(0.7, 0.7, 14)}
    _, one = paths.pair_entries("0.3/0.7", samples, {"a": 0.3, "b": 0.7}, 0.0, 14.0, 100.0)
    one["clients"][0]["launch_cost_us"] = 224.9
    assert "| 0.3/0.7 | torch-eager | 1 s | a | 0.3 |" in paths.markdown({"pairs": [one]})
    assert paths.markdown({"pairs": [one]}).count("| 224.9 |") == 1
