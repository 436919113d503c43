"""Spatial partitions in the config (issue 13): `sm=PCT[@NAME]`, YAML `sm:`/`partition:`, the
`oversubscribe` switch, and line-numbered errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.core import config as cfg
from gemini.core.config import ClientSpec, ConfigError, Partition, ResourceConfig
from gemini.core.units import GIB


def test_v1_files_have_no_partitions() -> None:
    config = cfg.parse_text("2\na 0.5 0.5 1GiB\nb 0.3 0.8 2GiB um\n")
    assert not config.spatial
    assert config.oversubscribe is False
    assert all(c.partition is None for c in config.clients)
    assert config.partitions() == ()


def test_text_partitions_shared_and_private() -> None:
    text = ("3\n"
            "train 0.5 1.0 40GiB sm=70@big\n"
            "eval  0.5 1.0 8GiB  sm=70@big\n"
            "infer 1.0 1.0 8GiB  sm=30\n")
    config = cfg.parse_text(text)
    assert config.spatial
    assert [c.partition for c in config.clients] == [
        Partition("big", 70), Partition("big", 70), Partition("infer", 30)]
    assert config.partitions("0") == (Partition("big", 70), Partition("infer", 30))
    assert config.get("eval") == ClientSpec("eval", 0.5, 1.0, 8 * GIB,
                                            partition=Partition("big", 70))


def test_partitions_are_per_gpu_and_sum_per_gpu() -> None:
    text = "3\na 1 1 1 sm=60@p\nb 1 1 1 sm=60@p gpu=1\nc 1 1 1 sm=40 gpu=1\n"
    config = cfg.parse_text(text)
    assert config.partitions("0") == (Partition("p", 60),)
    assert config.partitions("1") == (Partition("p", 60), Partition("c", 40))
    assert config.for_gpu("1").partitions("1") == config.partitions("1")


def test_yaml_partitions_and_oversubscribe() -> None:
    text = """oversubscribe: true
clients:
  - {name: a, request: 0.5, limit: 1, gpu_mem: 1GiB, sm: 80, partition: big}
  - {name: b, request: 0.5, limit: 1, gpu_mem: 1GiB, sm: 80, partition: big}
  - {name: c, request: 1, limit: 1, gpu_mem: 1GiB, sm: 50}
"""
    config = cfg.parse_yaml(text, "r.yaml")
    assert config.oversubscribe
    assert [c.partition for c in config.clients] == [
        Partition("big", 80), Partition("big", 80), Partition("c", 50)]


def test_text_oversubscribe_on_the_first_line() -> None:
    config = cfg.parse_text("2 oversubscribe\na 1 1 1 sm=80\nb 1 1 1 sm=80\n")
    assert config.oversubscribe
    assert config.for_gpu("0").oversubscribe


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("2\na 1 1 1 sm=70\nb 1 1 1 sm=40\n", 3,
     "the partitions take 110% of the SMs (a 70%, b 40%): at most 100% unless the file allows "
     "oversubscribe (text: 'N oversubscribe' on the first line"),
    ("3\na 1 1 1 sm=50 gpu=1\nb 1 1 1 sm=50\nc 1 1 1 sm=60@x gpu=1\n", 4,
     "the partitions of GPU 1 take 110% of the SMs (a 50%, x 60%)"),
    ("2\na 1 1 1 sm=70@p\nb 1 1 1 sm=60@p\n", 3,
     "partition 'p' is 70% of the SMs on line 2 but 60% here"),
    ("1\na 1 1 1 sm=0\n", 2, "sm 0 is outside 1..100"),
    ("1\na 1 1 1 sm=101\n", 2, "sm 101 is outside 1..100"),
    ("1\na 1 1 1 sm=12.5\n", 2, "sm '12.5' is not a whole percentage"),
    ("1\na 1 1 1 sm=30@\n", 2, "partition name '' must be 1 to 32 letters"),
    ("1\na 1 1 1 sm=30@a/b\n", 2, "partition name 'a/b' must be"),
    ("1\na 1 1 1 sm=30 sm=40\n", 2, "field 'sm' given twice"),
    ("1\na 1 1 1 part=x\n", 2, "or 'sm=PCT[@PARTITION]'"),
    ("2\na 1 1 1 sm=30\na 1 1 1 gpu=1\n", 3,
     "client 'a' has partition 'a' (30% of the SMs) on GPU 0 and no partition here"),
    ("2\na 1 1 1 sm=30@p\na 1 1 1 gpu=1 sm=40@q\n", 3,
     "(30% of the SMs) on GPU 0 and partition 'q' (40% of the SMs) here"),
    ("1 oversubscribed\na 1 1 1\n", 1, "(or 'N oversubscribe')"),
])
def test_text_errors_name_the_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg.parse_text(text, "r.txt")
    assert err.value.line == line
    assert reason in err.value.reason
    assert str(err.value).startswith(f"r.txt:{line}: ")


def test_the_same_partition_size_on_every_gpu_of_a_client_is_fine() -> None:
    config = cfg.parse_text("2\na 1 1 1 sm=30@p\na 1 1 1 gpu=1 sm=30@q\n")
    assert [c.partition for c in config.clients] == [Partition("p", 30), Partition("q", 30)]


@pytest.mark.parametrize(("text", "line", "reason"), [
    ("clients:\n  - {name: a, request: 1, limit: 1, gpu_mem: 1, sm: 70}\n"
     "  - {name: b, request: 1, limit: 1, gpu_mem: 1,\n     sm: 40}\n", 4,
     "the partitions take 110% of the SMs"),
    ("clients:\n  - name: a\n    request: 1\n    limit: 1\n    gpu_mem: 1\n    sm: 0\n", 6,
     "sm 0 is outside 1..100"),
    ("clients:\n  - name: a\n    request: 1\n    limit: 1\n    gpu_mem: 1\n    partition: p\n", 6,
     "partition needs sm"),
    ("clients:\n  - name: a\n    request: 1\n    limit: 1\n    gpu_mem: 1\n    sm: 5\n"
     "    partition: 'a b'\n", 7, "partition name 'a b' must be"),
    ("oversubscribe: yes please\nclients: []\n", 1, "oversubscribe must be true or false"),
    ("clients: []\noversubscribed: true\n", 2, "unknown top-level key 'oversubscribed'"),
])
def test_yaml_errors_name_the_line(text: str, line: int, reason: str) -> None:
    with pytest.raises(ConfigError) as err:
        cfg.parse_yaml(text, "r.yaml")
    assert (err.value.line, reason in err.value.reason) == (line, True), err.value


def test_oversubscribe_allows_more_than_the_gpu() -> None:
    text = "2 oversubscribe\na 1 1 1 sm=100\nb 1 1 1 sm=100\n"
    assert cfg.parse_text(text).partitions() == (Partition("a", 100), Partition("b", 100))


def test_a_partition_change_is_a_change() -> None:
    old = cfg.parse_text("1\na 1 1 1 sm=30\n")
    new = cfg.parse_text("1\na 1 1 1 sm=40\n")
    assert cfg.diff(old, new).changed == ("a",)
    assert cfg.diff(old, new).memory_changed == ()


# ---- round trips ---------------------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "c", "d"])


@st.composite
def spatial_configs(draw: st.DrawFn) -> ResourceConfig:
    """Valid configs on GPUs 0 and 1 with partitions of a few names, sizes kept consistent."""
    sizes = {p: draw(st.integers(1, 100)) for p in ("p", "q", "r")}
    oversubscribe = draw(st.booleans())
    clients = []
    for name in draw(st.lists(NAMES, unique=True, max_size=4)):
        part_name = draw(st.sampled_from([None, "p", "q", "r"]))
        gpus = draw(st.lists(st.sampled_from(["0", "1"]), unique=True, min_size=1))
        for gpu in gpus:
            part = None if part_name is None else Partition(part_name, sizes[part_name])
            clients.append(ClientSpec(name, 0.5, 1.0, GIB, gpu=gpu, partition=part))
    config = ResourceConfig(tuple(clients), oversubscribe)
    fits = all(sum(p.sm for p in config.partitions(g)) <= 100 for g in ("0", "1"))
    if not (fits or oversubscribe):
        config = ResourceConfig(tuple(clients), True)
    return config


@given(spatial_configs())
def test_render_text_round_trips(config: ResourceConfig) -> None:
    assert cfg.parse_text(cfg.render_text(config)) == config


@given(spatial_configs())
def test_render_yaml_round_trips(config: ResourceConfig) -> None:
    assert cfg.parse_yaml(cfg.render_yaml(config)) == config
