from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gemini.core import config as cfg
from gemini.core.config import ClientSpec, ConfigDiff, ConfigError, ResourceConfig
from gemini.core.units import GIB
from gemini.core.wire import MAX_NAME_LEN

REPO = Path(__file__).resolve().parents[2]

TWO = ResourceConfig(
    (ClientSpec("client1", 0.5, 0.5, 4 * GIB), ClientSpec("client2", 0.3, 0.8, 2 * GIB))
)


# ---- golden valid configs ------------------------------------------------------------------------


def test_original_master_sample() -> None:
    text = "2\nclient1 0.5 0.5 327374182400\nclient2 0.5 0.5 327374182400\n"
    config = cfg.parse_text(text)
    assert config.names == ("client1", "client2")
    assert config.get("client2") == ClientSpec("client2", 0.5, 0.5, 327374182400)
    assert config.get("nobody") is None


def test_kubeshare_sample_tabs_and_units() -> None:
    text = "3\nclient1\t0.1 0.5 1073741824\nclient2 0.2   0.8 1GiB\nclient3 0.4 0.5 2G um\n"
    config = cfg.parse_text(text)
    assert [c.gpu_mem for c in config.clients] == [GIB, GIB, 2 * GIB]
    assert [c.unified_memory for c in config.clients] == [False, False, True]


def test_comments_and_blank_lines() -> None:
    text = "# header\n\n  2   # two clients\n\nclient1 0.5 0.5 4GiB # half\n# gone 0.1 0.1 1\n" \
        "client2 0.3 0.8 2GiB\n\n"
    assert cfg.parse_text(text) == TWO


def test_zero_clients_is_valid() -> None:
    assert cfg.parse_text("0\n") == ResourceConfig(())


def test_limit_of_one_and_request_equal_limit() -> None:
    config = cfg.parse_text("1\nx 1 1 1\n")
    assert config.clients == (ClientSpec("x", 1.0, 1.0, 1),)


def test_name_of_max_length_in_utf8_bytes() -> None:
    name = "é" * (MAX_NAME_LEN // 2) + "a" * (MAX_NAME_LEN % 2)
    assert len(name.encode()) == MAX_NAME_LEN
    assert cfg.parse_text(f"1\n{name} 0.5 0.5 1\n").names == (name,)


def test_samples_in_repo_agree() -> None:
    text = (REPO / "resource-config.txt").read_text()
    yaml_text = (REPO / "resource-config.yaml").read_text()
    assert cfg.parse(text, "resource-config.txt") == TWO
    assert cfg.parse(yaml_text, "resource-config.yaml") == TWO


def test_yaml_golden() -> None:
    text = """
clients:
  - {name: client1, request: 0.5, limit: 0.5, gpu_mem: 4GiB}
  - name: client2
    request: 0.3
    limit: 0.8
    gpu_mem: 2147483648
    unified_memory: false
  - {name: um, request: 0.1, limit: 1, gpu_mem: "1 GiB", unified_memory: true}
"""
    config = cfg.parse_yaml(text)
    assert config.clients[:2] == TWO.clients
    assert config.clients[2] == ClientSpec("um", 0.1, 1.0, GIB, True)


def test_yaml_empty_list() -> None:
    assert cfg.parse_yaml("clients: []\n") == ResourceConfig(())
    assert cfg.parse_yaml("clients:\n") == ResourceConfig(())


@pytest.mark.parametrize("source", ["a.yaml", "dir/b.YML", "c.yml"])
def test_parse_picks_yaml_by_suffix(source: str) -> None:
    assert cfg.parse(cfg.render_yaml(TWO), source) == TWO


def test_parse_defaults_to_text() -> None:
    assert cfg.parse(cfg.render_text(TWO), "resource-config") == TWO


# ---- every error, with file:line: reason ---------------------------------------------------------

TEXT_ERRORS = [
    ("", None, "empty config: expected the number of clients N first"),
    ("# only a comment\n\n", None, "empty config"),
    ("two\na 0.5 0.5 1\n", 1, "client count 'two' is not a whole number"),
    ("-1\n", 1, "client count -1 is negative"),
    ("2 a 0.5 0.5 1\n", 1, "expected the number of clients N alone on the first line"),
    ("2\na 0.5 0.5 1\n", 1, "the first line announces 2 clients, found 1"),
    ("1\na 0.5 0.5 1\n\nb 0.5 0.5 1\n", 4, "more client lines than the 1 announced on line 1"),
    ("1\na 0.5 0.5\n", 2, "expected 'ID REQUEST LIMIT GPU_MEM [um] [gpu=G]', got 3 fields"),
    ("1\na 0.5 0.5 1 um x\n", 2, "unknown field 'x': expected 'um' (unified memory) or 'gpu=G'"),
    ("1\na 0.5 0.5 1 uvm\n", 2, "unknown field 'uvm'"),
    ("1\na 0.5 0.5 1 um um\n", 2, "field 'um' given twice"),
    ("1\na 0.5 0.5 1 gpu=\n", 2, "unknown field 'gpu='"),
    ("1\na 0.5 0.5 1 gpu=-1\n", 2, "gpu '-1' is neither an index"),
    ("1\na 0.5 0.5 1 gpu=one\n", 2, "gpu 'one' is neither an index"),
    ("1\na 0.5 0.5 1 gpu=0 gpu=1\n", 2, "field 'gpu' given twice"),
    ("2\na 0.5 0.5 1 gpu=1\na 0.1 0.2 1 gpu=01\n", 3,
     "duplicate client 'a' on GPU 1 (first on line 2)"),
    ("1\na half 0.5 1\n", 2, "request 'half' is not a number"),
    ("1\na 0.5 lots 1\n", 2, "limit 'lots' is not a number"),
    ("1\na nan 0.5 1\n", 2, "request 'nan' is not a finite number"),
    ("1\na 0.1 inf 1\n", 2, "limit 'inf' is not a finite number"),
    ("1\na 0 0.5 1\n", 2, "request 0 must be greater than 0"),
    ("1\na -0.1 0.5 1\n", 2, "request -0.1 must be greater than 0"),
    ("1\na 0.6 0.5 1\n", 2, "request 0.6 is above limit 0.5"),
    ("1\na 0.5 1.5 1\n", 2, "limit 1.5 is above 1 (a whole GPU)"),
    ("1\na 0.5 0.5 0\n", 2, "gpu_mem must be greater than 0, got '0'"),
    ("1\na 0.5 0.5 4XB\n", 2, "gpu_mem: '4XB' has an unknown unit 'XB'"),
    ("1\na 0.5 0.5 -5\n", 2, "gpu_mem: '-5' is not a size"),
    ("1\na 0.5 0.5 1.5\n", 2, "gpu_mem: '1.5' is not a whole number of bytes"),
    ("1\na 0.5 0.5 20000000T\n", 2, "gpu_mem '20000000T' is more than the 2^64 - 1 bytes"),
    ("1\na 0.5 0.5 1 gpu=" + "9" * 5000 + "\n", 2, "is neither an index"),
    ("2\na 0.5 0.5 1\na 0.1 0.2 1\n", 3, "duplicate client 'a' (first on line 2)"),
    (f"1\n{'n' * (MAX_NAME_LEN + 1)} 0.5 0.5 1\n", 2,
     f"is {MAX_NAME_LEN + 1} bytes, at most {MAX_NAME_LEN} allowed"),
    (f"1\n{'é' * 24} 0.5 0.5 1\n", 2, "is 48 bytes, at most 47 allowed"),
]


@pytest.mark.parametrize(("text", "line", "reason"), TEXT_ERRORS)
def test_text_errors(text: str, line: int | None, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.parse_text(text, "conf.txt")
    err = info.value
    assert (err.source, err.line) == ("conf.txt", line)
    assert reason in err.reason
    where = "conf.txt" if line is None else f"conf.txt:{line}"
    assert str(err) == f"{where}: {err.reason}"


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)
    assert str(ConfigError("f", 3, "bad")) == "f:3: bad"
    assert str(ConfigError("f", None, "bad")) == "f: bad"


def _item(**fields: object) -> str:
    base: dict[str, object] = {"name": "a", "request": 0.5, "limit": 0.5, "gpu_mem": 1}
    base.update(fields)
    lines = [f"    {k}: {v}" for k, v in base.items() if v is not None]
    return "clients:\n  -\n" + "\n".join(lines) + "\n"


YAML_ERRORS = [
    ("", None, "empty config: expected a 'clients:' list"),
    ("clients: [\n", 2, "invalid YAML"),
    ("clients: " + "[" * 5000 + "]" * 5000 + "\n", None, "invalid YAML: nested too deeply"),
    ("- a\n- b\n", 1, "expected a mapping with a 'clients:' list"),
    ("clients: []\nextra: 1\n", 2, "unknown top-level key 'extra'"),
    ("clients: {a: 1}\n", 1, "'clients' must be a list"),
    ("clients:\n  - just-a-name\n", 2, "each client must be a mapping"),
    (_item(limt=0.5), 7, "unknown field 'limt'"),
    (_item(gpu_mem=None), 3, "client is missing gpu_mem"),
    (_item(request="half"), 4, "request 'half' is not a number"),
    (_item(request="true"), 4, "request must be a number, got True"),
    (_item(request=0.7), 4, "request 0.7 is above limit 0.5"),
    (_item(limit=2), 5, "limit 2 is above 1"),
    (_item(gpu_mem="4XB"), 6, "gpu_mem: '4XB' has an unknown unit"),
    (_item(gpu_mem=0), 6, "gpu_mem must be greater than 0"),
    (_item(gpu_mem=1.5), 6, "gpu_mem must be bytes or a size"),
    (_item(gpu_mem=2**64), 6, "more than the 2^64 - 1 bytes a limit can be"),
    (_item(gpu="9" * 5000), None, "invalid YAML: Exceeds the limit (4300 digits)"),
    (_item(name="'a b'"), 3, "must not contain whitespace"),
    (_item(name=12), 3, "client name must be a non-empty string, got 12"),
    (_item(name="'#a'"), 3, "must not start with '#'"),
    (_item(unified_memory="yes please"), 7, "unified_memory must be true or false"),
    (_item(gpu=-1), 7, "gpu index -1 is negative"),
    (_item(gpu="'x'"), 7, "gpu 'x' is neither an index"),
    (_item(gpu="true"), 7, "gpu must be an index or a UUID"),
    (_item() + "  - {name: a, request: 0.1, limit: 0.1, gpu_mem: 1}\n", 7,
     "duplicate client 'a' (first on line 3)"),
]


@pytest.mark.parametrize(("text", "line", "reason"), YAML_ERRORS)
def test_yaml_errors(text: str, line: int | None, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        cfg.parse_yaml(text, "conf.yaml")
    err = info.value
    assert (err.source, err.line) == ("conf.yaml", line), str(err)
    assert reason in err.reason


# ---- round trips ---------------------------------------------------------------------------------

_NAME_CHARS = st.characters(
    blacklist_categories=("Cs", "Zs", "Zl", "Zp", "Cc"), blacklist_characters="#\x85"
)
names = st.text(_NAME_CHARS, min_size=1, max_size=12).filter(
    lambda s: len(s.encode()) <= MAX_NAME_LEN and not any(c.isspace() for c in s)
)
fractions = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)


@st.composite
def specs(draw: st.DrawFn) -> ClientSpec:
    a, b = draw(fractions), draw(fractions)
    mem = draw(st.integers(min_value=1, max_value=1 << 50))
    gpu = draw(st.sampled_from(["0", "1", "7", "GPU-8c1b2d6e-0c6b-4a4f-9d1e-2f3a4b5c6d7e"]))
    return ClientSpec(draw(names), min(a, b), max(a, b), mem, draw(st.booleans()), gpu)


configs = st.lists(specs(), max_size=6, unique_by=lambda s: (s.name, s.gpu)).map(
    lambda cs: ResourceConfig(tuple(cs))
)


@given(configs)
def test_text_round_trip(config: ResourceConfig) -> None:
    assert cfg.parse_text(cfg.render_text(config)) == config


@given(configs)
def test_yaml_round_trip(config: ResourceConfig) -> None:
    assert cfg.parse_yaml(cfg.render_yaml(config)) == config


# ---- GPUs ----------------------------------------------------------------------------------------


def test_a_client_on_two_gpus_with_its_own_share_and_memory_on_each() -> None:
    c = cfg.parse_text("3\na 0.4 0.4 2GiB\na 0.5 1.0 8GiB gpu=1\nb 0.2 0.5 1GiB um gpu=1\n")
    assert c.gpus == ("0", "1")
    assert c.names == ("a", "b")
    assert [(s.request, s.limit, s.gpu_mem) for s in c.of_client("a")] == [
        (0.4, 0.4, 2 << 30), (0.5, 1.0, 8 << 30)]
    assert c.for_gpu("1").names == ("a", "b")
    assert c.for_gpu("1").get("b") == ClientSpec("b", 0.2, 0.5, 1 << 30, True, "1")
    assert c.for_gpu("0").names == ("a",)
    y = cfg.parse_yaml("clients:\n  - {name: a, request: 0.5, limit: 1, gpu_mem: 1, gpu: 1}\n"
                       "  - {name: a, request: 0.5, limit: 1, gpu_mem: 1, gpu: GPU-1234}\n")
    assert [s.gpu for s in y.clients] == ["1", "GPU-1234"]


def test_v1_files_mean_gpu_0() -> None:
    c = cfg.parse_text("2\na 0.5 0.5 1\nb 0.5 0.5 1 um\n")
    assert {s.gpu for s in c.clients} == {"0"} and c.gpus == ("0",)
    assert cfg.render_text(c) == "2\na 0.5 0.5 1\nb 0.5 0.5 1 um\n"
    assert cfg.ResourceConfig(()).gpus == ("0",)


def test_gpu_problems_name_each_missing_gpu() -> None:
    c = cfg.parse_text("3\na 0.5 0.5 1\nb 0.5 0.5 1 gpu=GPU-aa\nc 0.5 0.5 1 gpu=2\n")
    present = [(0, "GPU-zz"), (1, "GPU-aa")]
    assert cfg.gpu_problems(c, present) == [
        "c: GPU 2 is not on this machine (GPUs: 0 (GPU-zz), 1 (GPU-aa))"]
    assert cfg.gpu_problems(c, [(0, "GPU-zz"), (1, "GPU-aa"), (2, "GPU-bb")]) == []
    assert cfg.gpu_problems(c, [(0, "GPU-zz"), (1, "GPU-bb"), (2, "GPU-aa")]) == [
        "GPU 2 is named GPU-aa and 2: use one name for it"]
    # a MIG instance: nvidia-smi --query-gpu lists whole GPUs only, so it is not checked
    mig = cfg.parse_text("1\na 0.5 0.5 1 gpu=MIG-1b2c3d4e-0000-0000-0000-000000000000\n")
    assert cfg.gpu_problems(mig, present) == []


# ---- diff ----------------------------------------------------------------------------------------


def test_diff_of_identical_configs_is_empty() -> None:
    d = cfg.diff(TWO, TWO)
    assert d == ConfigDiff((), (), (), ())
    assert not d


def test_diff_reports_each_kind() -> None:
    new = ResourceConfig((
        ClientSpec("client2", 0.3, 0.8, 4 * GIB),
        ClientSpec("client3", 0.1, 0.2, GIB),
    ))
    d = cfg.diff(TWO, new)
    assert d == ConfigDiff(
        added=("client3",), removed=("client1",), changed=("client2",), memory_changed=("client2",)
    )
    assert d


def test_diff_share_change_is_not_a_memory_change() -> None:
    new = ResourceConfig((ClientSpec("client1", 0.4, 0.5, 4 * GIB), TWO.clients[1]))
    d = cfg.diff(TWO, new)
    assert (d.changed, d.memory_changed) == (("client1",), ())


@given(configs, configs)
def test_diff_partitions_names(old: ResourceConfig, new: ResourceConfig) -> None:
    d = cfg.diff(old, new)
    assert set(d.added) == set(new.names) - set(old.names)
    assert set(d.removed) == set(old.names) - set(new.names)
    assert set(d.memory_changed) <= set(d.changed) <= set(old.names) & set(new.names)
    # Order alone is not a change: the scheduler keys clients by name.
    assert bool(d) == (set(old.clients) != set(new.clients))
