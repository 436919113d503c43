"""bench/autotune_beside.py: what XLA's autotuner measured in each JAX process of a kept run,
and how fast each client then ran."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import autotune_beside
from paths import keep_logs, steps_jsonl

from tests.unit.steps import halves


def profile(backend: str, nanos: int, algorithm: int | None = None) -> str:
    gemm = f"gemm {{ algorithm: {algorithm} }}" if algorithm is not None else ""
    return (f"config_profiles {{ config {{ backend: {backend} backend_config {{ {gemm} }} }}"
            f" scratch_bytes: 33554432 run_time {{ nanos: {nanos} }} }}\n")


def autotune_log(*profiles: str) -> str:
    return ('device: "x"\nper_backend_versions { key: "TRITON" value: "1" }\n'
            'instruction_profiles {\n  hlo_fingerprint: "f"\n' + "".join(profiles) + "}\n"
            'instruction_profiles { config_profiles { config { backend: TRITON } '
            'run_time { nanos: 1000 } } }\n')


def hook_log(pid: int, measured: list[tuple[float, float, int]], overruns: list[float],
             told: bool) -> str:
    lines = [f"gemini-hook[a {pid}] debug: [0.5] loaded: 1 pod manager(s)"]
    if told:
        lines.append(f"gemini-hook[a {pid}] info: [0.6] _ZN15stream_executor3gpu11DelayKernel "
                     "waits on the GPU for its host (XLA's autotuning timer): ...")
    lines += [f"gemini-hook[a {pid}] debug: [{t}] measured {ms} ms over {n} launches (0 graphs)"
              for t, ms, n in measured]
    lines += [f"gemini-hook[a {pid}] debug: [2.0] token end: overuse {x} ms (...)"
              for x in overruns]
    return "\n".join(lines) + "\n"


def test_each_process_says_its_fastest_candidate_its_cost_and_its_share(tmp_path: Path,
                                                                        capsys) -> None:
    results = tmp_path / "h100-x-paths-jax-autotune.json"
    results.write_text(json.dumps({
        "notes": ["jax: bare rate 100.0 steps/s from 3 extra bare runs"],
        "pairs": [{"case": "0.3/0.7", "window_s": 10, "error": "the run's own scoring failed"}]}))
    keep_logs(tmp_path / "h100-x-paths-jax-autotune-logs.tar", {
        "pairs-0.3-0.7-a-steps.jsonl": steps_jsonl(halves(0.3, 0.3, 12)),
        "pairs-0.3-0.7-b-steps.jsonl": steps_jsonl(halves(0.9, 0.5, 12)),
        # a: timed beside its neighbour, every candidate slow; its second instruction is not read
        "pairs-0.3-0.7-a.log": hook_log(11, [(1.0, 2.0, 10), (11.0, 4.0, 10), (12.5, 9.0, 1)],
                                        [0.1, 72.5], told=True),
        "pairs-0.3-0.7-b.log": hook_log(12, [(3.0, 1.0, 5)], [0.2], told=False),
        "autotune-11.txt": autotune_log(profile("CUBLASLT_FISSION", 212_300, 3),
                                        profile("CUBLASLT_FISSION", 215_600, 1)),
        "autotune-12.txt": autotune_log(profile("CUBLASLT_FISSION", 176_000, 1),
                                        profile("TRITON", 175_400)),
        "autotune-10.txt": autotune_log(profile("CUBLASLT_FISSION", 175_500, 1)),  # the bare run
    })
    assert autotune_beside.main([str(results), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["bare_rate"] == 100.0
    assert got["bare"] == [{"pid": "10", "tuned": {"us": 175.5,
                                                   "config": "CUBLASLT_FISSION algorithm=1"}}]
    a, b = got["clients"]
    assert (a["pid"], a["tuned"]) == ("11", {"us": 212.3, "config": "CUBLASLT_FISSION algorithm=3"})
    assert b["tuned"] == {"us": 175.4, "config": "TRITON"}
    # over the measured run only (from the first sample to the last): 6 ms over 20 launches
    assert a["us_per_launch"] == 300.0 and b["us_per_launch"] == 200.0
    assert (a["longest_overrun_ms"], a["told_delay_kernel"]) == (72.5, True)
    assert (b["longest_overrun_ms"], b["told_delay_kernel"]) == (0.2, False)
    # shares from work done against the bare rate: a at its 0.3; b at 0.7 over 10 s, its
    # halves 0.9 and 0.5 over every 1 s window
    assert a["error_pp_10s"] < 0.5 and b["error_pp_10s"] < 0.5
    assert abs(b["error_pp_1s"] - 20.0) < 0.5
