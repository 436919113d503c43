"""Dry runs (no GPU: path_app's `cpu` kind) of the small bench tools that tell gemini's cost
from the host's, bench/solo_ab.py, bench/duty_cycle.py and bench/continuous_cost.py, of
bench/paths.py's merge, and of bench/schd_cost.py (the scheduler core alone)."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from gemini.native import fake_driver_dir
from tests.system.conftest import with_tmpdir

ROOT = Path(__file__).resolve().parents[2]


def result_file(out: Path, pattern: str, *argv: str, env: dict[str, str] | None = None) -> Path:
    """Run a bench tool with --out `out` (`env` added to the environment); it must succeed and
    write one file matching `pattern` there."""
    p = subprocess.run([sys.executable, *argv, "--out", str(out)], cwd=ROOT, capture_output=True,
                       text=True, timeout=240, env={**with_tmpdir(out), **(env or {})})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    (path,) = out.glob(pattern)
    return path


@pytest.mark.system
def test_solo_ab_runs_every_variant_in_turn_and_keeps_each_hooked_runs_counts(
        tmp_path: Path) -> None:
    path = result_file(tmp_path, "*-solo-ab-cpu.json", "bench/solo_ab.py", "--path", "cpu",
                       "--rounds", "2", "--seconds", "0.3", "--cpus", "0",
                       "--variants", "disabled,solo,solo-clock", "--stats")
    result = json.loads(path.read_text())
    assert result["cpus"] == "0"
    assert set(result["runs"]) == {"bare", "disabled", "solo", "solo-clock"}
    assert all(len(r) == 2 and min(r) > 0 for r in result["runs"].values())
    # each variant's runs divided by the bare run of their round (a 0.3 s run on a loaded CPU
    # 0 moves by half: the rates themselves are not asserted)
    for variant in ("disabled", "solo", "solo-clock"):
        runs = zip(result["runs"][variant], result["runs"]["bare"], strict=True)
        ratios = [a / b for a, b in runs]
        summary = result[f"{variant}_over_bare"]
        assert summary["median"] == pytest.approx(statistics.median(ratios), abs=1e-4)
        assert (summary["min"], summary["max"]) == pytest.approx((min(ratios), max(ratios)),
                                                                 abs=1e-4)
    # --stats: the hook's counts, one dict per hooked run (bare and disabled: no gate); the
    # cpu kind launches nothing, so the hook counted no launch
    assert set(result["stats"]) == {"solo", "solo-clock"}
    assert all(len(runs) == 2 for runs in result["stats"].values())
    assert all(isinstance(c, dict) and not any(k.startswith("cuLaunch") for k in c)
               for runs in result["stats"].values() for c in runs)


@pytest.mark.system
def test_solo_ab_runs_a_capped_client_beside_bare_runs(tmp_path: Path) -> None:
    path = result_file(tmp_path, "*-solo-ab-cpu.json", "bench/solo_ab.py", "--path", "cpu",
                       "--rounds", "2", "--seconds", "0.3", "--variants", "cap",
                       "--cap", "0.25", "--cap-seconds", "0.4")
    result = json.loads(path.read_text())
    assert set(result["runs"]) == {"bare", "cap"}
    assert (result["cap"], result["cap_seconds"]) == (0.25, 0.4)
    assert all(len(r) == 2 and min(r) > 0 for r in result["runs"].values())
    # each capped run over the bare run of its round
    ratios = [a / b for a, b in zip(result["runs"]["cap"], result["runs"]["bare"], strict=True)]
    assert result["cap_over_bare"]["median"] == pytest.approx(statistics.median(ratios), abs=1e-4)
    # The cpu kind launches nothing to hold: not held to 0.25.  (Over 0.3 s runs the host moves
    # the rates, both ways: two test sessions at once read 1.95.)
    assert result["cap_over_bare"]["median"] > 0.6, result["runs"]
    assert "solo_over_bare" not in result


def test_solo_ab_refuses_an_unknown_variant() -> None:
    p = subprocess.run([sys.executable, "bench/solo_ab.py", "--variants", "solo,capped"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "unknown variant(s) capped" in p.stderr


@pytest.mark.system
def test_solo_ab_stops_at_its_budget_and_writes_the_rounds_done(tmp_path: Path) -> None:
    """A round is three fresh processes of 0.5 s at least: a 1 s budget leaves room for the
    first round only, and the result is still written."""
    path = result_file(tmp_path, "*-solo-ab-cpu.json", "bench/solo_ab.py", "--path", "cpu",
                       "--rounds", "20", "--seconds", "0.5", "--budget", "1")
    result = json.loads(path.read_text())
    assert result["rounds"] == 1
    assert all(len(r) == 1 for r in result["runs"].values())


@pytest.mark.system
def test_duty_cycle_reports_the_rate_while_working(tmp_path: Path) -> None:
    path = result_file(tmp_path, "*-duty-cycle.json", "bench/duty_cycle.py", "--path", "cpu",
                       "--seconds", "0.3", "--cycles", "10:15")
    result = json.loads(path.read_text())
    assert [(c["on_ms"], c["off_ms"], c["off"]) for c in result["cycles"]] == [
        (10.0, 15.0, "sleep"), (10.0, 15.0, "spin")]
    # the rate while working over the continuous run before the cycles
    bare = result["continuous_rate"][0]
    assert all(c["ratio"] == pytest.approx(c["rate_while_on"] / bare, abs=1e-3)
               for c in result["cycles"]), (bare, result["cycles"])
    # One millisecond asleep per step: working, it runs at about its continuous rate, not at
    # the 0.4 it would read over the whole period.  (Over 0.3 s runs a loaded host moves the
    # rates, both ways: a full `make test` read one ratio outside 1.0 +- 0.3.)
    assert all(c["ratio"] > 0.6 for c in result["cycles"]), (bare, result["cycles"])


@pytest.mark.system
def test_duty_cycle_profiles_the_rate_after_each_pause(tmp_path: Path) -> None:
    path = result_file(tmp_path, "*-duty-cycle.json", "bench/duty_cycle.py", "--path", "cpu",
                       "--seconds", "0.3", "--cycles", "10:15", "--off", "sleep",
                       "--sync-each-step", "--profile", "30:10")
    result = json.loads(path.read_text())
    assert [c["off"] for c in result["cycles"]] == ["sleep"]
    stretches = result["profile"]["stretches"]
    assert [(s["from_ms"], s["to_ms"]) for s in stretches] == [
        (0, 2), (2, 5), (5, 10), (10, 20), (20, 30.0)]
    # past the first steps the CPU loop runs about as fast as continuously (one-sided, as above:
    # a loaded host moves 0.3 s rates both ways)
    assert stretches[-1]["ratio"] > 0.6, stretches


@pytest.fixture(scope="module")
def capped_cpu(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """bench/paths.py's capped unit on the cpu kind, once for the tests below (each such run
    takes some 15 s): two processes, capped at 0.25 (--cap), their logs kept."""
    return result_file(tmp_path_factory.mktemp("cap-cpu"), "*-paths.json", "bench/paths.py",
                       "--only", "cap:cpu", "--cap", "0.25", "--cap-procs", "2",
                       "--cap-seconds", "2", "--solo-seconds", "0.3", "--skip-rtt",
                       "--skip-pairs", "--keep-logs")


@pytest.mark.system
def test_paths_merge_keeps_a_paths_solo_runs_under_a_later_capped_run(
        tmp_path: Path, capped_cpu: Path) -> None:
    """bench/paths.py: solo:PATH then cap:PATH (at a cap of 0.25, --cap) in two invocations,
    merged: each phase's keys (the capped run's gate counters and grants included) stay with
    their phase, and its report counts the two runs."""
    solo = result_file(tmp_path / "solo", "*-paths.json", "bench/paths.py", "--only", "solo:cpu",
                       "--solo-runs", "2", "--solo-seconds", "0.3", "--skip-rtt", "--skip-pairs",
                       "--fresh-processes", "--keep-logs")
    # (--fresh-processes: each run's process closed after it; its log kept all the same)
    solo_row = json.loads(solo.read_text())["paths"]["cpu"]
    # (it once failed under load with no logs, and pytest had removed the reason)
    assert not [k for k in solo_row if k.endswith("error")], solo_row
    with tarfile.open(f"{str(solo).removesuffix('.json')}-logs.tar") as tar:
        names = tar.getnames()
    assert sorted(n for n in names if n.endswith(("-solo0.log", "-solo1.log"))) == [
        "solo-cpu-002-cpu-solo0.log", "solo-cpu-004-cpu-solo1.log"], names
    merged = result_file(tmp_path / "merged", "*-paths.json", "bench/paths.py", "--merge-only",
                         "--merge", str(solo), "--merge", str(capped_cpu))
    row = json.loads(merged.read_text())["paths"]["cpu"]
    assert row["solo_over_bare"] > 0 and row["bare"] and row["solo"]
    assert "cap_gate" in row and "cap_granted_share" in row and row["cap_60s"] is not None
    assert row["cap_target"] == 0.25
    report = merged.with_suffix(".md").read_text()
    assert "capped at 0.25" in report
    assert "· 2 invocation(s)" in report  # (the merge's own command measured nothing)


@pytest.mark.system
def test_paths_cap_procs_adds_up_the_processes_work(capped_cpu: Path) -> None:
    """bench/paths.py --cap-procs 2: the capped client's work is its two processes' together
    (the cpu kind is never gated, so each does its bare rate and the two do twice that), and is
    set beside the same processes' work bare together."""
    path, out = capped_cpu, capped_cpu.parent
    row = json.loads(path.read_text())["paths"]["cpu"]
    # --keep-logs: one archive beside the results, whatever the runs (the device machine sends
    # back at most 8 files)
    (archive,) = out.glob("*-paths-logs.tar")
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == sorted(
        [path.name, path.with_suffix(".md").name, archive.name])
    with tarfile.open(archive) as tar:
        kept = set(tar.getnames())
        member = tar.extractfile("cap-cpu-steps.jsonl")
        assert member is not None
        steps = member.read().decode().splitlines()
    assert kept == {f"cap-cpu{suffix}" for suffix in (".log", "-p1.log", "-steps.jsonl",
                                                       "-grants.json", "-schd.log", "-pmgr.log")
                    } | {"bare-together-cpu-x2-0-steps.jsonl", "bare-together-cpu-x2-1-steps.jsonl"}
    assert len(steps) > 10 and "steps" in json.loads(steps[-1])
    assert row["cap_procs"] == 2
    # the bare runs it is judged against are named (their own seconds: 0.3 s runs have none)
    assert len(row["cap_bare_runs"]) == 3 and row["cap_bare_1s_spread"] is None
    shares = row["cap_process_shares"]
    assert len(shares) == 2 and all(s > 0.5 for s in shares), shares  # (about 1: never gated)
    assert row["cap_60s"] == pytest.approx(sum(shares), abs=0.1)
    # ... and the same two bare together do more than one's work (twice, on two idle cores): the
    # cap is judged against that too
    assert row["cap_bare_together"] > 1.2, row
    assert row["cap_60s_vs_together"] == pytest.approx(row["cap_60s"] / row["cap_bare_together"],
                                                       abs=0.01)


@pytest.mark.system
def test_paths_reads_a_capped_process_again_with_its_cap_lifted(tmp_path: Path) -> None:
    """bench/paths.py's capped unit, one process: after its capped run the config lifts the
    cap and the same process runs on; its rate then is what its capped shares are also judged
    against (the cpu kind is never gated: it does about its bare rate throughout)."""
    path = result_file(tmp_path, "*-paths.json", "bench/paths.py", "--only", "cap:cpu",
                       "--cap", "0.25", "--cap-seconds", "1.5", "--solo-seconds", "0.3",
                       "--skip-rtt", "--skip-pairs")
    row = json.loads(path.read_text())["paths"]["cpu"]
    assert "cap_self_error" not in row, row
    assert row["cap_self_over_bare"] > 0.5, row  # (about 1: the cpu kind is never gated)
    assert row["cap_self_rate"] == pytest.approx(row["cap_self_over_bare"]
                                                 * row["cap_bare_rate"], rel=0.01)
    assert row["cap_60s_self"] == pytest.approx(row["cap_60s"] / row["cap_self_over_bare"],
                                                rel=0.01)
    assert "against its own process uncapped" in path.with_suffix(".md").read_text()


@pytest.mark.system
def test_the_c_echo_floor_answers_through_one_and_two_hops() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import rtt_floor

    floor = rtt_floor.c_echo_floor(paced=5, back_to_back=50)
    assert set(floor) == {"1_hop", "2_hops"}
    for series in floor.values():
        assert set(series) == {"back_to_back", "every_10ms", "every_10ms_pace_spun"}
        assert all(0 < p50 <= p90 < 1e6 for p50, p90 in series.values()), floor


@pytest.mark.system
def test_the_c_echo_floor_refuses_a_chain_it_cannot_build(tmp_path: Path) -> None:
    exe = tmp_path / "echo_floor"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench/echo_floor.c")], check=True)
    p = subprocess.run([str(exe), "9", "0", "10", "0"], capture_output=True, text=True)
    assert p.returncode == 2 and "1-4 hops" in p.stderr


def test_paths_runs_an_optional_path_only_when_named() -> None:
    """bench/paths.py: torch-threads (two launching threads) is not among the issue's rows, so a
    run of every path leaves it out, and naming it (or its cap) runs it."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import paths
    finally:
        sys.path.remove(str(ROOT / "bench"))
    everything = paths.units_for(paths.PATHS + paths.EXTRA, skip_pairs=True, skip_rtt=True)
    assert ("cap", "torch-threads") not in everything
    assert ("cap", "torch-eager") in everything
    assert paths.units_for(["torch-threads"], True, True) == [("solo", "torch-threads"),
                                                               ("cap", "torch-threads")]
    assert paths.units_for(["cap:torch-threads"], True, True) == [("cap", "torch-threads")]
    # (pairs of capped clients likewise)
    assert not any(c.startswith("capped") for _, c in paths.units_for(paths.PATHS + paths.EXTRA,
                                                                      False, True))
    assert paths.units_for(["capped-pairs"], False, True) == [
        ("pairs", "capped 0.3+0.3"), ("pairs", "capped 0.4+0.5"), ("pairs", "capped 0.2+0.3+0.3")]
    assert paths.units_for(["procs-pairs"], False, True) == [("pairs", "0.5/0.5 a x2")]
    assert paths.units_for(["edit-pairs"], False, True) == [
        ("pairs", "0.25/0.75 b capped 0.3"), ("pairs", "capped 0.3+0.3 b raised to 0.6"),
        ("pairs", "capped 0.3+0.6 b lowered to 0.3"),
        ("pairs", "capped 0.3+0.35+0.3 b lowered to 0.3"),
        ("pairs", "capped 0.2+0.3+0.3 b raised to 0.4")]
    # (one case by its name, once)
    assert paths.units_for(["pair:capped 0.3+0.3 b late", "late-pairs"], False, True) == [
        ("pairs", "0.4/0.5 b late"), ("pairs", "capped 0.3+0.3 b late")]
    assert paths.units_for(["pair:capped 0.3+0.3 b late"], True, True) == []
    assert ("pairs", "0.25/0.75 b capped 0.3") not in paths.units_for(
        paths.PATHS + paths.EXTRA, False, True)


def test_paths_pairs_may_run_an_optional_path(capsys) -> None:
    """bench/paths.py --pair-path takes the paths run only when named (torch-eager-long, a
    program of long kernels, for procs-pairs), and still refuses one it does not know."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import paths
    finally:
        sys.path.remove(str(ROOT / "bench"))
    assert paths.main(["--plan", "--only", "procs-pairs", "--pair-path", "torch-eager-long"]) == 0
    assert "0.5/0.5 a x2" in capsys.readouterr().out
    with pytest.raises(SystemExit) as refused:
        paths.main(["--plan", "--only", "pairs", "--pair-path", "torch-eager-longer"])
    assert refused.value.code == 2


@pytest.mark.system
def test_paths_capped_pairs_judge_each_client_against_its_cap(tmp_path: Path) -> None:
    """bench/paths.py's capped pairs: two clients at 0.3 each, and three at 0.2, 0.3 and 0.3
    (capped there on a GPU; the cpu kind is never gated), judged on their 10 s and 1 s
    windows."""
    path = result_file(tmp_path, "*-paths.json", "bench/paths.py", "--only",
                       "pair:capped 0.3+0.3,pair:capped 0.2+0.3+0.3",
                       "--pair-path", "cpu", "--pair-seconds", "2", "--solo-seconds", "0.3",
                       "--skip-rtt")
    entries = json.loads(path.read_text())["pairs"]
    assert [(e["case"], e["window_s"]) for e in entries] == [
        ("capped 0.3+0.3", 10), ("capped 0.3+0.3", 1), ("capped 0.2+0.3+0.3", 10),
        ("capped 0.2+0.3+0.3", 1)]
    # (a case paths.py recorded as failed says why: it failed once in a loaded full run here)
    assert [e.get("error") for e in entries] == [None] * 4, entries
    assert [[c["target"] for c in e["clients"]] for e in entries] == [[0.3, 0.3]] * 2 + [
        [0.2, 0.3, 0.3]] * 2


@pytest.mark.system
def test_paths_late_and_edit_pairs_read_the_shares_from_the_late_start_and_the_edit(
        tmp_path: Path) -> None:
    """bench/paths.py's late and edit pairs.  Late: b starts --late-s after a, and
    the 1 s bins count from b's start, its first second included (the cpu kind is never gated:
    b does its whole bare work in every bin; bins from a's start would hold one where b had not
    begun, and bins after the other cases' 1 s warm-up would leave b's first second out).
    Edit: the config is edited --edit-s after the start (two clients capped at 0.3, b's cap
    raised to 0.6), and the bins count from the moment gem-schd applied it, against the shares
    after it."""
    late, edit = "0.4/0.5 b late", "capped 0.3+0.3 b raised to 0.6"
    path = result_file(tmp_path, "*-paths.json", "bench/paths.py", "--only",
                       f"pair:{late},pair:{edit}", "--pair-path", "cpu", "--pair-seconds", "2",
                       "--late-s", "1", "--edit-s", "1", "--solo-seconds", "0.3", "--skip-rtt",
                       "--keep-logs")
    entries = json.loads(path.read_text())["pairs"]
    assert [(e["case"], e["window_s"]) for e in entries] == [(late, 10), (late, 1), (edit, 10),
                                                            (edit, 1)]
    (one_s,) = (e for e in entries if e["window_s"] == 1 and e["case"] == late)
    assert one_s["windows"] == 2
    # uncapped 0.4/0.5: their requests, and the rest shared evenly (not the requests)
    assert [(c["name"], c["target"]) for c in one_s["clients"]] == [("a", 0.5), ("b", 0.5)]
    b = one_s["clients"][1]
    assert min(b["shares"]) >= 0.7, b  # (a bin before b began would read 0)
    (edited,) = (e for e in entries if e["window_s"] == 1 and e["case"] == edit)
    assert [(c["name"], c["target"]) for c in edited["clients"]] == [("a", 0.3), ("b", 0.6)]
    assert edited["edited_at_s"] == pytest.approx(1.0, abs=0.5), edited
    # gem-schd's log says when it applied the edit, after its debounce (50 ms)
    assert 0 < edited["edit_applied_ms"] < 1000, edited
    assert edited["windows"] == 1  # (the second after it; the run ends 2 s after the edit)


@pytest.mark.system
def test_paths_procs_pairs_judge_a_client_of_two_processes_by_their_work_together(
        tmp_path: Path) -> None:
    """bench/paths.py --only procs-pairs: client a runs two processes, whose work is added up
    and set against what the two do bare together (the cpu kind is never gated, so each client
    does its whole bare work, and a's bare rate is twice b's)."""
    path = result_file(tmp_path, "*-paths.json", "bench/paths.py", "--only", "procs-pairs",
                       "--pair-path", "cpu", "--pair-seconds", "2", "--solo-seconds", "0.3",
                       "--skip-rtt", "--keep-logs")
    entries = json.loads(path.read_text())["pairs"]
    assert [(e["case"], e["window_s"]) for e in entries] == [("0.5/0.5 a x2", 10),
                                                            ("0.5/0.5 a x2", 1)]
    (one_s,) = (e for e in entries if e["window_s"] == 1)
    assert "error" not in one_s, one_s  # (a failed case is recorded so; once in a loaded run)
    a, b = one_s["clients"]
    assert (a["name"], a["processes"], b["name"], b["processes"]) == ("a", 2, "b", 1)
    assert a["bare_rate"] == pytest.approx(2 * b["bare_rate"], rel=0.35)
    assert a["mean"] == pytest.approx(1.0, abs=0.3) and b["mean"] == pytest.approx(1.0, abs=0.3)
    with tarfile.open(next(tmp_path.glob("*-paths-logs.tar"))) as tar:
        # (and the two bare together: where the GPU turns from one's context to the other's)
        assert {"pairs-0.5-0.5ax2-a0-steps.jsonl", "pairs-0.5-0.5ax2-a1-steps.jsonl",
                "pairs-0.5-0.5ax2-b-steps.jsonl", "bare-together-cpu-x2-0-steps.jsonl",
                "bare-together-cpu-x2-1-steps.jsonl"} <= set(tar.getnames())
    # bench/turns.py reads a's turns there, in its grants (none: the cpu kind asks for no
    # token) and bare together
    p = subprocess.run([sys.executable, "bench/turns.py", str(next(tmp_path.glob(
        "*-paths-logs.tar")))], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr[-2000:]
    read = json.loads(p.stdout)
    assert read["processes"] == 2 and read["in_grants"]["spans"] == 0, read
    assert read["bare_together"]["steps_per_s"] > 0, read


@pytest.mark.system
def test_schd_cost_times_the_scheduler_core_per_request() -> None:
    """bench/schd_cost.py: a case per count of capped clients, each timed over its requests."""
    p = subprocess.run([sys.executable, "bench/schd_cost.py", "--clients", "1,3", "--seconds",
                        "2", "--rounds", "1"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    cases = json.loads(p.stdout)["cases"]
    assert [c["clients"] for c in cases] == [1, 3]
    assert all(c["grants"] > 10 and c["us_per_request"] > 0 for c in cases), cases


@pytest.mark.system
def test_continuous_cost_runs_a_program_bare_then_alone_under_the_hook(tmp_path: Path) -> None:
    """bench/continuous_cost.py on the cpu kind: both rates said (no launches: no runs)."""
    p = subprocess.run([sys.executable, "bench/continuous_cost.py", "cpu", "--seconds", "0.5"],
                       cwd=ROOT, capture_output=True, text=True, timeout=240,
                       env=with_tmpdir(tmp_path))
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    said = {line.split()[0]: line for line in p.stdout.splitlines()[1:]}
    assert said["bare"].endswith("steps/s") and said["solo"].endswith("steps/s"), p.stdout


@pytest.mark.system
def test_hook_ab_fake_holds_two_builds_of_the_hook_to_the_cap(tmp_path: Path) -> None:
    """bench/hook_ab_fake.py builds the hook of a revision and of the working tree and runs the
    fake GPU's client bare and capped under each (here both are HEAD's, where the tree has no
    change to the hook)."""
    path = result_file(tmp_path, "*-hook-ab-fake.json", "bench/hook_ab_fake.py", "--old", "HEAD",
                       "--rounds", "1", "--seconds", "1.5", "--cap", "0.4")
    result = json.loads(path.read_text())
    assert set(result["shares"]) == {"old", "new"}
    assert len(result["bare_kernels"]) == 1 and result["bare_kernels"][0] > 0
    # a host-paced loop capped at 0.4 (0.39 over 3 s runs on this machine; 1.5 s here, with
    # its first token's wait in it)
    for name, (share,) in result["shares"].items():
        assert 0.2 < share < 0.5, (name, result)


@pytest.mark.system
def test_cap_fake_holds_a_client_alone_to_its_cap_against_its_bare_run(tmp_path: Path) -> None:
    """bench/cap_fake.py runs the fake GPU's client bare, then capped under this tree's
    daemons, and writes the share (0.397-0.406 over 5 s on this machine; 1.5 s here, with its
    first token's wait in it)."""
    path = result_file(tmp_path, "*-cap-fake.json", "bench/cap_fake.py", "--rounds", "1",
                       "--seconds", "1.5", "--cap", "0.4")
    result = json.loads(path.read_text())
    [share] = result["shares"]
    assert 0.25 < share < 0.5, result


@pytest.mark.system
def test_pair_fake_reads_the_hand_overs_of_two_clients_taking_turns(tmp_path: Path) -> None:
    """bench/pair_fake.py runs two clients at once under this tree's daemons and reads where
    each token handed over ended against the next holder's start, for both clients."""
    path = result_file(tmp_path, "*-pair-fake.json", "bench/pair_fake.py", "--rounds", "1",
                       "--seconds", "1.5")
    [result] = json.loads(path.read_text())["rounds"]
    assert set(result["by_client"]) == {"a", "b"}, result
    assert result["handovers"] >= 10, result  # (some 20 a second at the default quotas)
    assert -5.0 < result["overlap_ms_median"] < 5.0, result


@pytest.mark.system
def test_the_stream_handle_probe_counts_the_handles_the_driver_hands_out(
        tmp_path: Path, fake_gpu_segment: str) -> None:
    """bench/probe_stream_handles.py runs through a driver (here the fake one) and counts the
    handles of each pattern: streams kept alive 8 together must have 8 handles at least (a
    probe that destroyed each before making the next would read 1)."""
    lib = fake_driver_dir() / "libcuda.so.1"
    path = result_file(tmp_path, "*-probe-stream-handles.json", "bench/probe_stream_handles.py",
                       "--lib", str(lib), "--rounds", "40",
                       env={"GEMINI_FAKE_GPU": fake_gpu_segment})
    counts = json.loads(path.read_text())["distinct_handles"]
    assert set(counts) == {f"{how}_{kind}" for how in ("one_at_a_time", "batches_of_8")
                           for kind in ("blocking", "non_blocking")}
    for kind in ("blocking", "non_blocking"):
        assert counts[f"batches_of_8_{kind}"] >= 8, counts
