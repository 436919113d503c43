from __future__ import annotations

import pytest

from gemini.core.config import parse_text
from gemini.core.launch import (
    BackendArgs,
    ProcessSpec,
    parse_placement,
    place,
    placed,
    placement_text,
    plan_added,
    plan_backend,
    plan_command,
)

CONFIG = parse_text("2\nclient1 0.5 0.5 4GiB\nclient2 0.3 0.8 2GiB\n")


def test_backend_plan_matches_the_original_launcher() -> None:
    args = BackendArgs("gem-schd", "gem-pmgr", config="/etc/gemini/resource-config.txt")
    schd, pm1, pm2 = plan_backend(CONFIG, args)
    assert schd == ProcessSpec(
        "scheduler",
        ("gem-schd", "-p", "/etc/gemini", "-f", "resource-config.txt", "-P", "50051",
         "-q", "300", "-m", "20", "-w", "10000", "--ip", "127.0.0.1"),
        {},
        "127.0.0.1:50051",
        "0",
        50051,
        scheduler=True,
    )
    assert pm1 == ProcessSpec(
        "client1",
        ("gem-pmgr",),
        {"SCHEDULER_IP": "127.0.0.1", "SCHEDULER_PORT": "50051", "POD_MANAGER_IP": "127.0.0.1",
         "POD_MANAGER_PORT": "50052", "POD_NAME": "client1"},
        "127.0.0.1:50052",
        "0",
        50052,
    )
    assert (pm2.name, pm2.env["POD_MANAGER_PORT"], pm2.listen) == (
        "client2", "50053", "127.0.0.1:50053"
    )


def test_commands_with_arguments_ip_port_and_options() -> None:
    args = BackendArgs(
        "python -m gemini.cli.schd", "'my pmgr' --flag", ip="10.0.0.2", port=6000,
        config="resource-config.yaml", base_quota=250.5, min_quota=100, window=2000, verbose=2,
    )
    schd, pm1, _ = plan_backend(CONFIG, args)
    assert schd.argv == (
        "python", "-m", "gemini.cli.schd", "-p", ".", "-f", "resource-config.yaml", "-P", "6000",
        "-q", "250.5", "-m", "100", "-w", "2000", "--ip", "10.0.0.2", "-v", "2",
    )
    assert pm1.argv == ("my pmgr", "--flag")
    assert pm1.env["SCHEDULER_IP"] == pm1.env["POD_MANAGER_IP"] == "10.0.0.2"
    assert (pm1.env["SCHEDULER_PORT"], pm1.env["POD_MANAGER_PORT"]) == ("6000", "6001")


def test_relative_config_directory() -> None:
    schd = plan_backend(CONFIG, BackendArgs("s", "p", config="conf/r.txt"))[0]
    assert schd.argv[1:5] == ("-p", "conf", "-f", "r.txt")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (BackendArgs("", "p"), "the scheduler command is empty"),
        (BackendArgs("s", "  "), "the pod manager command is empty"),
        (BackendArgs("s", "p", port=65534), "port 65536 is outside 1..65535"),
        (BackendArgs("s", "p", port=0), "port 0 is outside"),
    ],
)
def test_backend_plan_errors(args: BackendArgs, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        plan_backend(CONFIG, args)


def test_added_clients_get_their_launch_port_when_free() -> None:
    new = parse_text("3\nclient1 0.5 0.5 1\nclient2 0.3 0.8 1\nclient3 0.1 0.1 1\n")
    running = {("client1", "0"): 50052, ("client2", "0"): 50053}
    (spec,) = plan_added(new, BackendArgs("s", "p"), running)
    assert (spec.name, spec.env["POD_MANAGER_PORT"]) == ("client3", "50054")


def test_added_clients_never_take_a_running_port() -> None:
    # client0 is inserted first: its launch-time port 50052 belongs to client1.
    new = parse_text("3\nclient0 0.1 0.1 1\nclient1 0.5 0.5 1\nclient2 0.3 0.8 1\n")
    running = {("client1", "0"): 50052, ("client2", "0"): 50053}
    (spec,) = plan_added(new, BackendArgs("s", "p"), running)
    assert (spec.name, spec.env["POD_MANAGER_PORT"]) == ("client0", "50054")


def test_nothing_added() -> None:
    running = {("client1", "0"): 1, ("client2", "0"): 2}
    assert plan_added(CONFIG, BackendArgs("s", "p"), running) == []


TWO_GPUS = parse_text("3\na 0.4 0.4 1\na 0.5 1.0 1 gpu=1\nb 0.5 0.5 1 gpu=1\n")


def test_one_scheduler_per_gpu_and_one_pod_manager_per_client_and_gpu() -> None:
    plan = plan_backend(TWO_GPUS, BackendArgs("s", "p"))
    assert [(p.name, p.port, p.scheduler) for p in plan] == [
        ("scheduler", 50051, True), ("scheduler@gpu1", 50055, True),
        ("a", 50052, False), ("a@gpu1", 50053, False), ("b@gpu1", 50054, False)]
    assert plan[1].argv[-2:] == ("--gpu", "1")
    assert "--gpu" not in plan[0].argv  # GPU 0: the original argv
    by_name = {p.name: p for p in plan}
    assert by_name["a"].env["SCHEDULER_PORT"] == "50051"
    assert by_name["a@gpu1"].env["SCHEDULER_PORT"] == "50055"
    assert by_name["a@gpu1"].env["POD_NAME"] == "a"
    assert place(TWO_GPUS, 50051).of_client("a") == [("0", 50052), ("1", 50053)]


def test_a_config_on_gpu_1_only_has_its_scheduler_on_the_base_port() -> None:
    plan = plan_backend(parse_text("1\na 0.5 0.5 1 gpu=GPU-ab\n"), BackendArgs("s", "p"))
    assert [(p.name, p.port) for p in plan] == [("scheduler@GPU-ab", 50051), ("a@GPU-ab", 50052)]


def test_a_client_moved_to_a_new_gpu_gets_a_scheduler_there_and_a_free_port() -> None:
    new = parse_text("2\nclient1 0.5 0.5 1 gpu=2\nclient2 0.3 0.8 1\n")
    running = {("client1", "0"): 50052, ("client2", "0"): 50053}
    plan = plan_added(new, BackendArgs("s", "p"), running, {"0": 50051})
    assert [(p.name, p.port, p.scheduler) for p in plan] == [
        ("scheduler@gpu2", 50054, True), ("client1@gpu2", 50055, False)]
    assert plan[1].env["SCHEDULER_PORT"] == "50054"


def test_a_new_gpus_scheduler_gets_a_metrics_port_no_running_one_holds() -> None:
    """b moves from GPU 1 to GPU 2: GPU 2 is the new config's second GPU, whose port GPU 1's
    scheduler, still running, holds (the new one failed to start, and stopped everything)."""
    args = BackendArgs("s", "p", metrics_port=9400)
    new = parse_text("2\na 0.5 0.5 1 gpu=0\nb 0.5 0.5 1 gpu=2\n")
    running = {("a", "0"): 50052, ("b", "1"): 50053}
    (schd, _) = plan_added(new, args, running, {"0": 50051, "1": 50054}, {9400, 9401})
    assert schd.argv[schd.argv.index("--metrics-port") + 1] == "9402"


def test_a_placement_file_round_trips_and_says_where_a_running_backend_put_a_client() -> None:
    running = {("client1", "0"): 50052, ("client0", "0"): 50054}
    assert parse_placement(placement_text(running)) == running
    config = parse_text("2\nclient0 0.5 0.5 1\nclient1 0.5 0.5 1\n")
    assert placed(config, 50051, "client1", running) == [("0", 50052)]
    assert placed(config, 50051, "client1", {}) == [("0", 50053)]  # (as the order places it)
    for garbage in ("", "{}", '{"pod_managers": [{"name": "a"}]}', "[1]"):
        with pytest.raises(ValueError):
            parse_placement(garbage)


def test_command_plan() -> None:
    spec = plan_command("client1", 50052, ["python", "-c", "print(1)"], "/lib/libgemhook.so.1")
    assert spec.argv == ("python", "-c", "print(1)")
    assert spec.env == {
        "POD_MANAGER_IP": "127.0.0.1",
        "POD_MANAGER_PORT": "50052",
        "POD_NAME": "client1",
        "LD_PRELOAD": "/lib/libgemhook.so.1",
    }


def test_command_plan_keeps_existing_preload_after_the_hook() -> None:
    spec = plan_command("c", 1, ["x"], "/h.so", ip="10.1.1.1", ld_preload="/a.so:/b.so")
    assert spec.env["LD_PRELOAD"] == "/h.so:/a.so:/b.so"
    assert spec.env["POD_MANAGER_IP"] == "10.1.1.1"


@pytest.mark.parametrize(("command", "port"), [([], 1), (["x"], 70000)])
def test_command_plan_errors(command: list[str], port: int) -> None:
    with pytest.raises(ValueError):
        plan_command("c", port, command, "/h.so")


def test_a_secret_file_reaches_both_daemons() -> None:
    args = BackendArgs("gem-schd", "gem-pmgr", secret_file="/etc/gemini/secret")
    schd, pm1, _ = plan_backend(CONFIG, args)
    assert schd.argv[-2:] == ("--secret-file", "/etc/gemini/secret")
    assert pm1.env["GEMINI_SECRET_FILE"] == "/etc/gemini/secret"


def test_command_plan_with_a_unix_socket_and_a_secret() -> None:
    spec = plan_command("c", None, ["app"], "/h.so", unix="/run/g/c.sock", secret_file="/s")
    assert spec.env["POD_MANAGER_PORT"] == "unix:/run/g/c.sock"
    assert spec.env["GEMINI_SECRET_FILE"] == "/s"
    assert spec.listen == "unix:/run/g/c.sock"
    with pytest.raises(ValueError, match="longer than"):
        plan_command("c", None, ["app"], "/h.so", unix="/" + "x" * 200)
    with pytest.raises(ValueError, match="port or Unix socket"):
        plan_command("c", None, ["app"], "/h.so")


def test_metrics_ports_follow_the_gpus() -> None:
    plan = plan_backend(TWO_GPUS, BackendArgs("s", "p", metrics_port=9400))
    schedulers = [p for p in plan if p.scheduler]
    assert [p.argv[p.argv.index("--metrics-port") + 1] for p in schedulers] == ["9400", "9401"]
    assert all("--metrics-port" not in p.argv for p in plan_backend(CONFIG, BackendArgs("s", "p")))


def test_a_metrics_port_a_daemon_listens_on_is_refused_and_an_edit_takes_neither() -> None:
    """--port 56051 --metrics-port 56052: client1's pod manager's port; the scheduler could
    not bind it, and everything stopped."""
    with pytest.raises(ValueError, match=r"port 50052 is the client1's; take one outside "
                                         r"50051\.\.50053"):
        plan_backend(CONFIG, BackendArgs("s", "p", metrics_port=50052))
    assert plan_backend(CONFIG, BackendArgs("s", "p", metrics_port=50054))
    # An edit: a new client's pod manager does not take a scheduler's metrics port, nor a new
    # scheduler's metrics port a pod manager's.
    args = BackendArgs("s", "p", metrics_port=50054)
    running = {("client1", "0"): 50052, ("client2", "0"): 50053}
    added = parse_text("4\nclient1 0.5 0.5 4GiB\nclient2 0.3 0.8 2GiB\nc3 0.1 0.1 1\n"
                       "c4 0.1 0.1 1 gpu=1\n")
    plan = plan_added(added, args, running, metrics_ports={50054})
    ports = {spec.name: spec.port for spec in plan}
    metrics = [int(p.argv[p.argv.index("--metrics-port") + 1]) for p in plan if p.scheduler]
    assert 50054 not in ports.values()
    assert not set(metrics) & {*ports.values(), *running.values(), 50051}


def test_clock_and_short_window_options_reach_every_scheduler() -> None:
    from gemini.cli import launch_backend, schd
    from gemini.cli._args import shared_turns_of

    ns = launch_backend.build_parser().parse_args(
        ["s", "p", "--no-clock", "--short-window", "2500", "--no-shared-speed",
         "--no-hand-over-at-arrival", "--no-lone-turns"])
    args = BackendArgs("s", "p", clock=ns.clock, short_window=ns.short_window,
                       shared_speed=ns.shared_speed, hand_over_at_arrival=ns.hand_over_at_arrival,
                       lone_turns=ns.lone_turns,
                       shared_turns=shared_turns_of(ns.lone_turns, ns.shared_turns))
    schedulers = [p for p in plan_backend(TWO_GPUS, args) if p.scheduler]
    assert len(schedulers) == 2
    for spec in schedulers:
        parsed = schd.build_parser().parse_args(list(spec.argv[1:]))  # gem-schd takes them
        assert (parsed.clock, parsed.short_window, parsed.shared_speed) == (False, 2500.0, False)
        timing = schd._settings(parsed)[0]
        assert not timing.shared_speed and not timing.hand_over_at_arrival
        assert not timing.lone_turns and not timing.shared_turns
    [default] = [p for p in plan_backend(CONFIG, BackendArgs("s", "p")) if p.scheduler]
    assert not {"--no-clock", "--short-window", "--no-shared-speed", "--no-hand-over-at-arrival",
                "--no-lone-turns", "--no-shared-turns"} & set(default.argv)
    timing = schd._settings(schd.build_parser().parse_args([]))[0]
    assert timing.shared_speed and timing.hand_over_at_arrival and timing.lone_turns  # (defaults)
    assert timing.shared_turns
    on = launch_backend.build_parser().parse_args(["s", "p"])
    assert on.shared_speed and on.hand_over_at_arrival and on.lone_turns
    assert shared_turns_of(on.lone_turns, on.shared_turns)
    off = launch_backend.build_parser().parse_args(["s", "p", "--no-shared-turns"])
    [spec] = [p for p in plan_backend(CONFIG, BackendArgs(
        "s", "p", shared_turns=shared_turns_of(off.lone_turns, off.shared_turns))) if p.scheduler]
    assert "--no-shared-turns" in spec.argv
    assert not schd._settings(schd.build_parser().parse_args(list(spec.argv[1:])))[0].shared_turns


def test_a_pod_manager_whose_client_left_during_its_pause_is_not_started_again() -> None:
    import asyncio

    from gemini.cli.launch_backend import Supervisor

    args = BackendArgs("s", "p")
    [spec] = [s for s in plan_backend(CONFIG, args) if s.env.get("POD_NAME") == "client2"]
    spawned = []

    async def main() -> None:
        supervisor = Supervisor(args, parse_text("1\nclient1 0.5 0.5 4GiB\n"))
        supervisor.spawn = spawned.append  # type: ignore[assignment,method-assign]
        supervisor._say_placement = lambda: None  # type: ignore[method-assign]
        await supervisor._start_again(spec, 0.0)

    asyncio.run(main())
    assert spawned == []


def test_a_lock_file_that_cannot_be_opened_is_said(tmp_path, monkeypatch, capsys) -> None:
    from gemini.cli import launch_backend

    monkeypatch.setattr(launch_backend.tempfile, "gettempdir", lambda: str(tmp_path))
    (tmp_path / f"gemini-backend-{launch_backend.os.getuid()}-50051.lock").mkdir()
    assert launch_backend.hold_port(50051) is None
    assert "launch-backend: cannot open" in capsys.readouterr().err


def test_an_agents_metrics_pages_listen_on_the_pods_address_its_tokens_on_loopback() -> None:
    from gemini.cli import schd
    from gemini.k8s import agent

    settings = agent.settings_from(agent.build_parser().parse_args(["--metrics-port", "9400"]))
    [spec] = [p for p in plan_backend(CONFIG, settings.backend) if p.scheduler]
    parsed = schd.build_parser().parse_args(list(spec.argv[1:]))
    assert (parsed.ip, parsed.metrics_ip, parsed.metrics_port) == ("127.0.0.1", "0.0.0.0", 9400)
    plain = [p for p in plan_backend(CONFIG, BackendArgs("s", "p", metrics_port=9400))
             if p.scheduler]
    assert "--metrics-ip" not in plain[0].argv  # (launch-backend: --ip's, as before)


def test_launch_backends_gpu_list_reaches_every_scheduler_and_none_is_not_checked() -> None:
    """(So that an edit launch-backend refuses is refused by each GPU's gem-schd, while the
    Kubernetes agent, which gives no list, keeps every present GPU's scheduler up beside a
    vanished GPU's pods.)"""
    from gemini.cli import schd
    from gemini.core.config import format_present_gpus, parse_present_gpus

    present = ((0, "GPU-aaa"), (1, "GPU-bbb"))
    args = BackendArgs("s", "p", present_gpus=present)
    schedulers = [p for p in plan_backend(TWO_GPUS, args) if p.scheduler]
    assert len(schedulers) == 2
    for spec in schedulers:
        parsed = schd.build_parser().parse_args(list(spec.argv[1:]))
        assert parsed.present_gpus == list(present)
    [default] = [p for p in plan_backend(CONFIG, BackendArgs("s", "p")) if p.scheduler]
    assert "--present-gpus" not in default.argv
    assert schd.build_parser().parse_args([]).present_gpus is None
    assert parse_present_gpus(format_present_gpus(list(present))) == list(present)
    assert parse_present_gpus("") == []
    for bad in ("0", "x=GPU-a", "0=", "0=GPU a"):
        with pytest.raises(ValueError):
            parse_present_gpus(bad)
    with pytest.raises(SystemExit):  # (an empty list would refuse every GPU of the config)
        schd.build_parser().parse_args(["--present-gpus", ""])
