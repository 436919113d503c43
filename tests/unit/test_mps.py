"""What the launchers and gem-schd say to each other about MPS, and a partition client's MPS
environment (issue 13; pure)."""

from __future__ import annotations

import pytest

from gemini.core import config as cfg
from gemini.core.launch import BackendArgs, plan_backend
from gemini.core.mps import (
    MpsPaths,
    MpsState,
    client_env,
    default_dir,
    is_fault,
    pinned_limit,
    server_pids,
)

UP = MpsState(True, "", "/run/m/pipe", "/run/m/log")


def test_state_round_trips_and_garbage_is_refused() -> None:
    for state in (UP, MpsState(False, "no GPU"), MpsState(True, "", "/p", "/l", "server 7 ...")):
        assert MpsState.from_json(state.to_json()) == state
    for text, why in (("{", "not JSON"), ("[]", "not an MPS state"),
                      ('{"spatial": "yes"}', "not an MPS state"),
                      ('{"spatial": true}', "names no pipe directory")):
        with pytest.raises(ValueError, match=why):
            MpsState.from_json(text)


def test_paths_and_default_directory() -> None:
    paths = MpsPaths("/tmp/gemini-mps-1000-50051")
    assert default_dir("/tmp", 1000, 50051) == paths.root
    assert (paths.pipe_dir, paths.log_dir, paths.state_file, paths.pid_file) == (
        f"{paths.root}/pipe", f"{paths.root}/log", f"{paths.root}/state.json",
        f"{paths.root}/pipe/nvidia-cuda-mps-control.pid")


def test_client_env_under_mps() -> None:
    specs = cfg.parse_text("2\na 1 1 4GiB sm=40@p gpu=1\na 1 1 1000001 sm=40@q\n").clients
    env, line = client_env(specs, UP)
    assert env == {
        "CUDA_MPS_PIPE_DIRECTORY": "/run/m/pipe",
        "CUDA_MPS_LOG_DIRECTORY": "/run/m/log",
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "40",
        # device 0 is the client's first GPU; MiB rounded up, never under the hook's limit
        "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=5120M,1=1025M",
    }
    assert line == "spatial: partition p, 40% of the SMs (MPS)"
    _, warned = client_env(specs, MpsState(True, "", "/p", "/l", "server 9 is recovering"))
    assert warned.endswith("; warning: server 9 is recovering")


def test_client_env_without_mps_or_partition() -> None:
    spec = cfg.parse_text("1\na 1 1 1 sm=25\n").clients
    assert client_env(spec, MpsState(False, "MPS could not start: no GPU")) == (
        {}, "time-sliced: partition a (25% of the SMs) needs MPS, and MPS could not start: no GPU")
    assert client_env(cfg.parse_text("1\na 1 1 1\n").clients, UP) == (
        {}, "time-sliced (no partition)")


def test_pinned_limit_rounds_up_to_mib_and_leaves_room_for_the_context() -> None:
    specs = cfg.parse_text("2\na 1 1 1048576\na 1 1 1048577 gpu=1\n").clients
    assert pinned_limit(specs) == "0=1025M,1=1026M"


def test_control_answers() -> None:
    assert server_pids("1234\n5678\n") == [1234, 5678]
    assert server_pids("") == []
    assert is_fault("FAULT") and is_fault("Server is in fault state")
    assert not is_fault("ACTIVE")


def test_schedulers_follow_the_state_file_only_when_told() -> None:
    config = cfg.parse_text("1\na 1 1 1 sm=50\n")
    plain = plan_backend(config, BackendArgs("gem-schd", "gem-pmgr"))[0]
    assert "--mps-state" not in plain.argv
    told = plan_backend(config, BackendArgs("gem-schd", "gem-pmgr", mps_state="/m/state.json"))
    assert told[0].argv[-2:] == ("--mps-state", "/m/state.json")
