"""The resource config: which clients share the GPU, with what share of time and memory.

Two syntaxes build the same frozen `ResourceConfig`:

* the original text format (`parse_text`), which existing `resource-config.txt` files use;
* YAML (`parse_yaml`), for people who prefer named fields.

A client may name a spatial partition of its GPU (`Partition`: a percentage of the SMs, given to
the partition's processes through MPS); clients of one partition share it by tokens, as the
clients without one share the whole GPU (README: Spatial sharing).

Every problem is a `ConfigError` naming the source, the line and the reason, so a bad edit to a
running scheduler's config can be reported in one line and ignored.  Pure: text in, values out;
reading files and watching them is `gemini.daemon.watcher`'s job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from gemini.core.units import parse_bytes
from gemini.core.wire import MAX_BYTES, MAX_NAME_LEN

YAML_SUFFIXES = (".yaml", ".yml")
UM_FLAG = "um"
GPU_KEY = "gpu"
SM_KEY = "sm"
DEFAULT_GPU = "0"
OVERSUBSCRIBE = "oversubscribe"
_PARTITION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,32}")
MAX_GPU_INDEX_DIGITS = 6  # (Python's int() refuses strings of over 4300 digits)


@dataclass(frozen=True)
class Partition:
    """A spatial partition of one GPU: `sm` percent of its SMs (MPS active threads, a whole
    number 1..100), shared by the clients that name it.  A client's REQUEST and LIMIT are then
    shares of its partition's time, not of the whole GPU's."""

    name: str
    sm: int


@dataclass(frozen=True)
class ClientSpec:
    """One client (pod, tenant) on one GPU: guaranteed and maximum share of that GPU's time,
    memory limit in bytes.  A client on several GPUs has one spec per GPU.  `gpu` is the GPU as
    written: an index ("0", "1") or a UUID ("GPU-…", "MIG-…")."""

    name: str
    request: float
    limit: float
    gpu_mem: int
    unified_memory: bool = False
    gpu: str = DEFAULT_GPU
    partition: Partition | None = None  # None: time-sliced on the whole GPU, as in Gemini

    @property
    def capped(self) -> bool:
        """Its limit caps it (a limit of 1 caps nothing)."""
        return self.limit < 1.0


@dataclass(frozen=True)
class ResourceConfig:
    clients: tuple[ClientSpec, ...]
    # The partitions of a GPU may add up to more than 100 % of its SMs (MPS allows it; they then
    # compete for the SMs they share).
    oversubscribe: bool = False

    def get(self, name: str) -> ClientSpec | None:
        """The client's first spec (its only one in a one-GPU config or `for_gpu`'s result)."""
        return next((c for c in self.clients if c.name == name), None)

    @property
    def names(self) -> tuple[str, ...]:
        """Client names, each once, in order of first appearance."""
        return tuple(dict.fromkeys(c.name for c in self.clients))

    @property
    def gpus(self) -> tuple[str, ...]:
        """The GPUs in use, in order of first appearance (GPU 0 when there are no clients)."""
        return tuple(dict.fromkeys(c.gpu for c in self.clients)) or (DEFAULT_GPU,)

    def for_gpu(self, gpu: str) -> ResourceConfig:
        """The clients of one GPU: what that GPU's scheduler runs on."""
        return ResourceConfig(tuple(c for c in self.clients if c.gpu == gpu), self.oversubscribe)

    @property
    def spatial(self) -> bool:
        """Whether any client names a partition (launch-backend then starts MPS)."""
        return any(c.partition is not None for c in self.clients)

    def partitions(self, gpu: str = DEFAULT_GPU) -> tuple[Partition, ...]:
        """The partitions of one GPU, each once, in order of first appearance."""
        found = (c.partition for c in self.clients if c.gpu == gpu and c.partition is not None)
        return tuple(dict.fromkeys(found))

    def of_client(self, name: str) -> tuple[ClientSpec, ...]:
        """A client's specs, one per GPU, in config order."""
        return tuple(c for c in self.clients if c.name == name)


@dataclass(frozen=True)
class ConfigDiff:
    """What changed between two configs; `memory_changed` is a subset of `changed`."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    memory_changed: tuple[str, ...]

    def __bool__(self) -> bool:
        return bool(self.added or self.removed or self.changed)


class ConfigError(ValueError):
    """A config that cannot be used; `line` is None for problems of the whole file."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


class _Invalid(ValueError):
    """A reason without a place; the parsers add source and line."""


# ---- shared validation ---------------------------------------------------------------------------


def _check_name(value: object) -> str:
    if not isinstance(value, str) or not value:
        raise _Invalid(f"client name must be a non-empty string, got {value!r}")
    if any(ch.isspace() for ch in value) or "\0" in value:
        raise _Invalid(f"client name {value!r} must not contain whitespace or NUL")
    if value.startswith("#"):
        raise _Invalid(f"client name {value!r} must not start with '#' (that starts a comment)")
    # The name travels in every 80-byte request (wire.py); a longer one could never register.
    size = len(value.encode("utf-8"))
    if size > MAX_NAME_LEN:
        raise _Invalid(f"client name {value!r} is {size} bytes, at most {MAX_NAME_LEN} allowed")
    return value


def _number(field: str, value: object) -> float:
    # bool is an int subclass; `request: true` in YAML is a mistake, not 1.0.
    if isinstance(value, bool):
        raise _Invalid(f"{field} must be a number, got {value!r}")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            raise _Invalid(f"{field} {value!r} is not a number") from None
    else:
        raise _Invalid(f"{field} must be a number, got {value!r}")
    if not math.isfinite(number):
        raise _Invalid(f"{field} {value!r} is not a finite number")
    return number


def _shares(request_value: object, limit_value: object) -> tuple[float, float]:
    request = _number("request", request_value)
    limit = _number("limit", limit_value)
    if request <= 0:
        raise _Invalid(f"request {request:g} must be greater than 0")
    if request > limit:
        raise _Invalid(f"request {request:g} is above limit {limit:g}")
    if limit > 1:
        raise _Invalid(f"limit {limit:g} is above 1 (a whole GPU)")
    return request, limit


def _memory(value: object) -> int:
    if isinstance(value, bool):
        raise _Invalid(f"gpu_mem must be a size, got {value!r}")
    if isinstance(value, int):
        size = value
    elif isinstance(value, str):
        try:
            size = parse_bytes(value)
        except ValueError as exc:
            raise _Invalid(f"gpu_mem: {exc}") from None
    else:
        raise _Invalid(f"gpu_mem must be bytes or a size like '4GiB', got {value!r}")
    if size <= 0:
        raise _Invalid(f"gpu_mem must be greater than 0, got {value!r}")
    if size > MAX_BYTES:
        # (its every MEM_LIMIT reply failed to encode: its pod manager reconnected for ever)
        raise _Invalid(f"gpu_mem {value!r} is more than the 2^64 - 1 bytes a limit can be")
    return size


def parse_gpu(value: object) -> str:
    """A GPU index (a whole number >= 0) or a UUID as nvidia-smi prints it (GPU-…, MIG-…)."""
    if isinstance(value, bool):
        raise _Invalid(f"gpu must be an index or a UUID, got {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise _Invalid(f"gpu index {value} is negative")
        return str(value)
    if isinstance(value, str):
        if value.isdigit() and len(value) <= MAX_GPU_INDEX_DIGITS:
            return str(int(value))
        if value.startswith(("GPU-", "MIG-")) and len(value) > 4 and "," not in value:
            return value
    raise _Invalid(f"gpu {value!r} is neither an index (0, 1, ...) nor a UUID (GPU-...)")


def _sm_percent(value: object) -> int:
    if isinstance(value, bool):
        raise _Invalid(f"sm must be a whole percentage of the SMs, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if not isinstance(value, int):
        raise _Invalid(f"sm {value!r} is not a whole percentage of the SMs (1 to 100)")
    if not 1 <= value <= 100:
        raise _Invalid(f"sm {value} is outside 1..100 (percent of the GPU's SMs)")
    return value


def _partition(sm: object, name: object) -> Partition:
    if not isinstance(name, str) or not _PARTITION_NAME.fullmatch(name):
        raise _Invalid(f"partition name {name!r} must be 1 to 32 letters, digits, '_', '.' or '-'")
    return Partition(name, _sm_percent(sm))


def _client(
    name: object, request: object, limit: object, gpu_mem: object, um: bool,
    gpu: object = DEFAULT_GPU, partition: tuple[object, object | None] | None = None,
) -> ClientSpec:
    """`partition`: (sm, name) as written; a partition without a name is the client's own."""
    shares = _shares(request, limit)
    client = _check_name(name)
    part = None
    if partition is not None:
        sm, part_name = partition
        part = _partition(sm, client if part_name is None else part_name)
    return ClientSpec(client, *shares, _memory(gpu_mem), um, parse_gpu(gpu), part)


def _on_line(line: int | None) -> str:
    return "" if line is None else f" on line {line}"


class _Registry:
    """Collects clients in order and rejects a second use of a name on one GPU, and partitions
    that do not fit together (`result`)."""

    def __init__(self, source: str, oversubscribe: bool = False) -> None:
        self.source = source
        self.oversubscribe = oversubscribe
        self.first_line: dict[tuple[str, str], int | None] = {}
        # (gpu, partition name) -> (its size, the line that first named it)
        self.partitions: dict[tuple[str, str], tuple[int, int | None]] = {}
        self.clients: list[ClientSpec] = []

    def add(self, spec: ClientSpec, line: int | None, sm_line: int | None = None) -> None:
        """`sm_line`: where the partition is written, when not on `line` (YAML keys)."""
        key = (spec.name, spec.gpu)
        if key in self.first_line:
            first = self.first_line[key]
            where = "" if first is None else f" (first on line {first})"
            on = "" if spec.gpu == DEFAULT_GPU else f" on GPU {spec.gpu}"
            raise ConfigError(self.source, line, f"duplicate client {spec.name!r}{on}{where}")
        self._check_partition(spec, line if sm_line is None else sm_line)
        self.first_line[key] = line
        self.clients.append(spec)

    def _check_partition(self, spec: ClientSpec, line: int | None) -> None:
        part = spec.partition
        if part is not None:
            known = self.partitions.setdefault((spec.gpu, part.name), (part.sm, line))
            if known[0] != part.sm:
                raise ConfigError(self.source, line, (
                    f"partition {part.name!r} is {known[0]}% of the SMs{_on_line(known[1])} "
                    f"but {part.sm}% here: its clients must give the same size"))
        # One process has one MPS thread percentage, whatever GPU it runs on.
        other = next((c for c in self.clients if c.name == spec.name), None)
        if other is not None and _sm_of(other.partition) != _sm_of(part):
            raise ConfigError(self.source, line, (
                f"client {spec.name!r} has {_describe_partition(other.partition)} on GPU "
                f"{other.gpu} and {_describe_partition(part)} here: its processes have one MPS "
                "thread percentage, so give it partitions of one size on all its GPUs or none"))

    def result(self) -> ResourceConfig:
        config = ResourceConfig(tuple(self.clients), self.oversubscribe)
        if not self.oversubscribe:
            for gpu in config.gpus:
                self._check_sum(gpu, config.partitions(gpu))
        return config

    def _check_sum(self, gpu: str, partitions: tuple[Partition, ...]) -> None:
        total = 0
        for part in partitions:
            total += part.sm
            if total > 100:
                sizes = ", ".join(f"{p.name} {p.sm}%" for p in partitions)
                on = "" if gpu == DEFAULT_GPU else f" of GPU {gpu}"
                line = self.partitions[(gpu, part.name)][1]
                raise ConfigError(self.source, line, (
                    f"the partitions{on} take {sum(p.sm for p in partitions)}% of the SMs "
                    f"({sizes}): at most 100% unless the file allows oversubscribe (text: "
                    f"'N {OVERSUBSCRIBE}' on the first line; YAML: '{OVERSUBSCRIBE}: true')"))


def _sm_of(part: Partition | None) -> int | None:
    return None if part is None else part.sm


def _describe_partition(part: Partition | None) -> str:
    return "no partition" if part is None else f"partition {part.name!r} ({part.sm}% of the SMs)"


# ---- the original text format --------------------------------------------------------------------


def _content_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each line that has fields; a field starting with '#' ends it."""
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        cut = next((i for i, f in enumerate(fields) if f.startswith("#")), len(fields))
        if fields[:cut]:
            yield number, fields[:cut]


def _count(source: str, line: int, fields: list[str]) -> tuple[int, bool]:
    """The first line: the client count N, then optionally the word `oversubscribe`."""
    oversubscribe = len(fields) == 2 and fields[1].lower() == OVERSUBSCRIBE
    if len(fields) != 1 and not oversubscribe:
        raise ConfigError(source, line, "expected the number of clients N alone on the first line "
                          f"(or 'N {OVERSUBSCRIBE}')")
    try:
        count = int(fields[0])
    except ValueError:
        reason = f"client count {fields[0]!r} is not a whole number"
        raise ConfigError(source, line, reason) from None
    if count < 0:
        raise ConfigError(source, line, f"client count {count} is negative")
    return count, oversubscribe


def _text_client(fields: list[str]) -> ClientSpec:
    if len(fields) < 4:
        raise _Invalid(
            f"expected 'ID REQUEST LIMIT GPU_MEM [um] [gpu=G]', got {len(fields)} fields "
            "(a spatial partition adds 'sm=PCT[@PARTITION]')"
        )
    um, gpu = False, DEFAULT_GPU
    partition: tuple[object, object | None] | None = None
    seen: set[str] = set()
    for extra in fields[4:]:
        key, _, value = extra.partition("=")
        key = key.lower()
        if key in seen:
            raise _Invalid(f"field {key!r} given twice")
        seen.add(key)
        if extra.lower() == UM_FLAG:
            um = True
        elif key == GPU_KEY and value:
            gpu = value
        elif key == SM_KEY and value:
            sm, at, name = value.partition("@")
            partition = (sm, name if at else None)
        else:
            raise _Invalid(f"unknown field {extra!r}: expected 'um' (unified memory) or 'gpu=G' "
                           "or 'sm=PCT[@PARTITION]' (a spatial partition)")
    return _client(*fields[:4], um, gpu, partition)


def parse_text(text: str, source: str = "<string>") -> ResourceConfig:
    """Parse the original format: a client count N (optionally followed by `oversubscribe`), then
    N lines `ID REQUEST LIMIT GPU_MEM [um] [gpu=G] [sm=PCT[@PARTITION]]`.

    Fields are separated by any spaces or tabs.  Unlike the original (which read whitespace-
    separated tokens from anywhere), each client must sit on its own line, so errors can name it;
    blank lines and `#` comments (a field starting with `#` comments out the rest of its line)
    are allowed.
    REQUEST and LIMIT are fractions of the GPU with 0 < REQUEST <= LIMIT <= 1; GPU_MEM is bytes or a
    size with a unit (`4GiB`, see `units.parse_bytes`); `um` marks a unified-memory client;
    `gpu=G` puts the line on GPU G (an index or a UUID; default GPU 0, so Gemini v1 files mean
    GPU 0).  A client on several GPUs has one line per GPU, each with its own shares and memory.
    `sm=PCT@NAME` puts the client in partition NAME of its GPU, PCT percent of the SMs (`sm=PCT`
    alone: a partition of its own, named after it); the partitions of a GPU take at most 100 %
    unless the first line says `oversubscribe`.  Gemini v1 files have none of these.
    """
    lines = list(_content_lines(text))
    if not lines:
        raise ConfigError(source, None, "empty config: expected the number of clients N first")
    (count_line, count_fields), *client_lines = lines
    count, oversubscribe = _count(source, count_line, count_fields)
    if len(client_lines) < count:
        reason = f"the first line announces {count} clients, found {len(client_lines)}"
        raise ConfigError(source, count_line, reason)
    if len(client_lines) > count:
        reason = f"more client lines than the {count} announced on line {count_line}"
        raise ConfigError(source, client_lines[count][0], reason)
    registry = _Registry(source, oversubscribe)
    for line, fields in client_lines:
        try:
            spec = _text_client(fields)
        except _Invalid as exc:
            raise ConfigError(source, line, str(exc)) from None
        registry.add(spec, line)
    return registry.result()


def render_text(config: ResourceConfig) -> str:
    """The config in the original format; `parse_text(render_text(c)) == c`."""
    out = [f"{len(config.clients)}" + (f" {OVERSUBSCRIBE}" if config.oversubscribe else "")]
    for c in config.clients:
        um = f" {UM_FLAG}" if c.unified_memory else ""
        gpu = "" if c.gpu == DEFAULT_GPU else f" {GPU_KEY}={c.gpu}"
        sm = "" if c.partition is None else f" {SM_KEY}={c.partition.sm}@{c.partition.name}"
        out.append(f"{c.name} {c.request!r} {c.limit!r} {c.gpu_mem}{um}{gpu}{sm}")
    return "\n".join(out) + "\n"


# ---- YAML ----------------------------------------------------------------------------------------

_YAML_FIELDS = ("name", "request", "limit", "gpu_mem", "unified_memory", "gpu", "sm", "partition")
_YAML_TOP = ("clients", OVERSUBSCRIBE)
_YAML_REQUIRED = _YAML_FIELDS[:4]


def _line(node: yaml.Node | None) -> int | None:
    return None if node is None else node.start_mark.line + 1


def _mapping_lines(node: yaml.Node | None) -> dict[Any, int | None]:
    """key -> line of that key, for a YAML mapping node (empty for anything else)."""
    if not isinstance(node, yaml.MappingNode):
        return {}
    return {key.value: _line(key) for key, _ in node.value}


def _item_nodes(root: yaml.Node | None) -> list[yaml.Node | None]:
    """The nodes of the `clients:` list items, to give each error a line."""
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        if key.value == "clients" and isinstance(value, yaml.SequenceNode):
            return list(value.value)
    return []


def _load_yaml(text: str, source: str) -> tuple[Any, yaml.Node | None]:
    try:
        # Two passes: compose for the line marks, safe_load for plain values.  Configs are tiny.
        return yaml.safe_load(text), yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(source, line, f"invalid YAML: {problem}") from None
    except RecursionError:  # PyYAML's recursive parser on a few thousand nested brackets
        raise ConfigError(source, None, "invalid YAML: nested too deeply") from None
    except ValueError as exc:  # PyYAML's int() of a number of over 4300 digits
        raise ConfigError(source, None, f"invalid YAML: {exc}") from None


def _clients_list(data: Any, root: yaml.Node | None, source: str) -> list[Any]:
    if data is None:
        raise ConfigError(source, None, "empty config: expected a 'clients:' list")
    if not isinstance(data, dict):
        raise ConfigError(source, _line(root), "expected a mapping with a 'clients:' list")
    lines = _mapping_lines(root)
    extra = sorted(str(k) for k in data if k not in _YAML_TOP)
    if extra:
        first = extra[0]
        raise ConfigError(source, lines.get(first), f"unknown top-level key {first!r}")
    clients = data.get("clients")
    if clients is None:
        clients = [] if "clients" in data else None
    if not isinstance(clients, list):
        where = lines.get("clients", _line(root))
        raise ConfigError(source, where, "'clients' must be a list of {name, request, limit, ...}")
    return clients


def _yaml_client(item: Any, lines: dict[Any, int | None]) -> ClientSpec:
    """Raises _Invalid with the key it blames as `args[1]`, so the caller can find its line."""
    if not isinstance(item, dict):
        raise _Invalid("each client must be a mapping of name, request, limit, gpu_mem")
    for key in item:
        if key not in _YAML_FIELDS:
            raise _Invalid(f"unknown field {key!r}: expected {', '.join(_YAML_FIELDS)}", key)
    missing = [k for k in _YAML_REQUIRED if k not in item]
    if missing:
        raise _Invalid(f"client is missing {', '.join(missing)}")
    um = item.get("unified_memory", False)
    if not isinstance(um, bool):
        raise _Invalid(f"unified_memory must be true or false, got {um!r}", "unified_memory")
    partition = None
    if "sm" in item:
        partition = (item["sm"], item.get("partition"))
    elif "partition" in item:
        raise _Invalid("partition needs sm: the percentage of the SMs it has", "partition")
    try:
        return _client(item["name"], item["request"], item["limit"], item["gpu_mem"], um,
                       item.get("gpu", DEFAULT_GPU), partition)
    except _Invalid as exc:
        raise _Invalid(str(exc), _blamed_field(str(exc))) from None


def _blamed_field(reason: str) -> str | None:
    # The shared checks word their reasons by field; point the line at that field's key.
    if reason.startswith("client name"):
        return "name"
    if reason.startswith("gpu ") and not reason.startswith("gpu_mem"):
        return "gpu"
    if reason.startswith("sm "):
        return "sm"
    if reason.startswith("partition name"):
        return "partition"
    return next((f for f in _YAML_REQUIRED if reason.startswith(f)), None)


def parse_yaml(text: str, source: str = "<string>") -> ResourceConfig:
    """Parse YAML: a top-level `clients:` list of mappings, in the order given.

        clients:
          - {name: client1, request: 0.5, limit: 0.5, gpu_mem: 4GiB}
          - name: client2
            request: 0.2
            limit: 1.0
            gpu_mem: 1073741824
            unified_memory: true     # optional, default false
            gpu: 1                   # optional: index or UUID, default 0
            sm: 30                   # optional: a spatial partition, 30 % of the SMs,
            partition: small         #   named small (default: the client's name)
        oversubscribe: true          # optional: partitions may add up to more than 100 %

    A list (not a mapping keyed by name) keeps the order the text format has, which gives pod
    managers their ports.  A client on several GPUs is listed once per GPU.  The fields and
    checks are those of `parse_text`.
    """
    data, root = _load_yaml(text, source)
    clients = _clients_list(data, root, source)
    oversubscribe = data.get(OVERSUBSCRIBE, False)
    if not isinstance(oversubscribe, bool):
        raise ConfigError(source, _mapping_lines(root).get(OVERSUBSCRIBE),
                          f"{OVERSUBSCRIBE} must be true or false, got {oversubscribe!r}")
    nodes = _item_nodes(root)
    registry = _Registry(source, oversubscribe)
    for index, item in enumerate(clients):
        node = nodes[index] if index < len(nodes) else None
        lines = _mapping_lines(node)
        try:
            spec = _yaml_client(item, lines)
        except _Invalid as exc:
            key = exc.args[1] if len(exc.args) > 1 else None
            raise ConfigError(source, lines.get(key, _line(node)), exc.args[0]) from None
        registry.add(spec, lines.get("name", _line(node)), lines.get("sm"))
    return registry.result()


def render_yaml(config: ResourceConfig) -> str:
    """The config as YAML; `parse_yaml(render_yaml(c)) == c`."""
    items = []
    for c in config.clients:
        item: dict[str, Any] = {
            "name": c.name, "request": c.request, "limit": c.limit, "gpu_mem": c.gpu_mem,
        }
        if c.unified_memory:
            item["unified_memory"] = True
        if c.gpu != DEFAULT_GPU:
            item["gpu"] = int(c.gpu) if c.gpu.isdigit() else c.gpu
        if c.partition is not None:
            item["sm"] = c.partition.sm
            item["partition"] = c.partition.name
        items.append(item)
    top: dict[str, Any] = {"clients": items}
    if config.oversubscribe:
        top[OVERSUBSCRIBE] = True
    return yaml.safe_dump(top, sort_keys=False, allow_unicode=True)


# ---- either ------------------------------------------------------------------------------------


def parse(text: str, source: str = "<string>") -> ResourceConfig:
    """Parse by the source's suffix: .yaml/.yml is YAML, anything else the original format."""
    if source.lower().endswith(YAML_SUFFIXES):
        return parse_yaml(text, source)
    return parse_text(text, source)


def diff(old: ResourceConfig, new: ResourceConfig) -> ConfigDiff:
    """By client name: meant for the configs of one GPU (`for_gpu`)."""
    before = {c.name: c for c in old.clients}
    after = {c.name: c for c in new.clients}
    both = [n for n in after if n in before]
    return ConfigDiff(
        added=tuple(n for n in after if n not in before),
        removed=tuple(n for n in before if n not in after),
        changed=tuple(n for n in both if before[n] != after[n]),
        memory_changed=tuple(n for n in both if before[n].gpu_mem != after[n].gpu_mem),
    )


def format_present_gpus(present: list[tuple[int, str]]) -> str:
    """nvidia-smi's (index, UUID) list as one argument: "0=GPU-...,1=GPU-..."."""
    return ",".join(f"{index}={uuid}" for index, uuid in present)


def parse_present_gpus(text: str) -> list[tuple[int, str]]:
    """The inverse of format_present_gpus; ValueError for anything else."""
    present = []
    for item in filter(None, text.split(",")):
        index, sep, uuid = item.partition("=")
        if not sep or not index.isdigit() or not uuid or any(c.isspace() for c in uuid):
            raise ValueError(f"{item!r} is not INDEX=UUID")
        present.append((int(index), uuid))
    return present


def gpu_problems(config: ResourceConfig, present: list[tuple[int, str]]) -> list[str]:
    """What is wrong with the config's GPUs on a machine with `present` ((index, UUID) pairs):
    a GPU that is not there, or one GPU named two ways (it would get two schedulers).  A MIG
    instance's UUID is not checked: nvidia-smi --query-gpu lists whole GPUs only (every MIG
    config was refused)."""
    by_name = {str(i): i for i, _ in present} | {u: i for i, u in present}
    listed = ", ".join(f"{i} ({u})" for i, u in present) or "none"
    problems = [
        f"{c.name}: GPU {c.gpu} is not on this machine (GPUs: {listed})"
        for c in config.clients
        if c.gpu not in by_name and not c.gpu.startswith("MIG-")
    ]
    spellings: dict[int, list[str]] = {}
    for gpu in config.gpus:
        if gpu in by_name:
            spellings.setdefault(by_name[gpu], []).append(gpu)
    problems += [
        f"GPU {index} is named {' and '.join(names)}: use one name for it"
        for index, names in spellings.items()
        if len(names) > 1
    ]
    return problems
