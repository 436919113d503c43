"""ConfigWatcher against the real file system: waits on queues with timeouts, never on sleeps."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from gemini.core.config import ConfigError, ResourceConfig, parse_text
from gemini.daemon.watcher import ConfigWatcher, read_config

TIMEOUT_S = 5.0
ONE = "1\nclient1 0.5 0.5 1GiB\n"
TWO = "2\nclient1 0.5 0.5 1GiB\nclient2 0.2 0.4 2GiB\n"
THREE = "3\nclient1 0.5 0.5 1GiB\nclient2 0.2 0.4 2GiB\nclient3 0.1 0.1 1MiB\n"


class _Queue(logging.Handler):
    """Log records into an asyncio queue; records come from the loop thread (watcher._reload)."""

    def __init__(self, queue: asyncio.Queue[logging.LogRecord]) -> None:
        super().__init__(logging.ERROR)
        self.queue = queue

    def emit(self, record: logging.LogRecord) -> None:
        self.queue.put_nowait(record)


class Harness:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.configs: asyncio.Queue[ResourceConfig] = asyncio.Queue()
        self.errors: asyncio.Queue[logging.LogRecord] = asyncio.Queue()

    async def next_config(self) -> ResourceConfig:
        return await asyncio.wait_for(self.configs.get(), TIMEOUT_S)

    async def next_error(self, containing: str = "") -> str:
        """The next error line with `containing` in it; an in-place write can briefly show a
        truncated file, whose errors are skipped here."""
        while True:
            record = await asyncio.wait_for(self.errors.get(), TIMEOUT_S)
            if containing in record.getMessage():
                return record.getMessage()


def run_watching(path: Path, body: Callable[[Harness], Awaitable[None]], **kw: object) -> None:
    async def main() -> None:
        h = Harness(path)
        handler = _Queue(h.errors)
        logger = logging.getLogger("gemini.config")
        logger.addHandler(handler)
        loop = asyncio.get_running_loop()
        watcher = ConfigWatcher(path, loop, h.configs.put_nowait, 0.02, **kw)  # type: ignore[arg-type]
        watcher.start()
        try:
            await body(h)
        finally:
            watcher.stop()
            logger.removeHandler(handler)

    asyncio.run(main())


@pytest.fixture
def conf(tmp_path: Path) -> Path:
    path = tmp_path / "resource-config.txt"
    path.write_text(ONE)
    return path


def test_in_place_write(conf: Path) -> None:
    async def body(h: Harness) -> None:
        conf.write_text(TWO)
        assert await h.next_config() == parse_text(TWO)

    run_watching(conf, body)


def test_rename_over(conf: Path) -> None:
    async def body(h: Harness) -> None:
        tmp = conf.with_name(".resource-config.txt.swp")
        tmp.write_text(TWO)
        os.replace(tmp, conf)
        assert await h.next_config() == parse_text(TWO)

    run_watching(conf, body)


def test_invalid_edit_keeps_last_good_then_fixed_edit_applies(conf: Path) -> None:
    async def body(h: Harness) -> None:
        conf.write_text("2\nclient1 0.5 0.5 1GiB\nclient2 0.9 0.4 2GiB\n")
        message = await h.next_error("request 0.9")
        assert message == (
            f"{conf}:3: request 0.9 is above limit 0.4; keeping the last good config"
        )
        conf.write_text(TWO)
        assert await h.next_config() == parse_text(TWO)
        assert h.configs.empty()

    run_watching(conf, body)


def test_unchanged_content_and_other_files_do_not_call_back(conf: Path) -> None:
    """Each unchanged write follows a broken one, so its own read is seen ("valid again"):
    written together, the debounce would read only the last of them."""
    valid: asyncio.Queue[logging.LogRecord] = asyncio.Queue()
    informed = _Queue(valid)
    informed.setLevel(logging.INFO)
    logger = logging.getLogger("gemini.config")

    async def valid_again() -> None:
        while "valid again" not in (await asyncio.wait_for(valid.get(), TIMEOUT_S)).msg:
            pass

    async def body(h: Harness) -> None:
        for same in (ONE, ONE.replace("1GiB", "1073741824")):  # the baseline; other spelling
            conf.write_text("2\nclient1 0.5 0.5 1GiB\n")
            await h.next_error("2 clients")
            conf.write_text(same)
            await valid_again()
            assert h.configs.empty()
        (conf.parent / "unrelated.txt").write_text("x")
        conf.write_text(TWO)
        # The first callback is the first real change: nothing before TWO was reported.
        assert await h.next_config() == parse_text(TWO)
        assert h.configs.empty()

    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(informed)
    try:
        run_watching(conf, body)
    finally:
        logger.removeHandler(informed)
        logger.setLevel(level)


@pytest.mark.parametrize("through_link", [False, True])
def test_a_file_being_written_is_read_once_its_writer_closes_it(
    conf: Path, through_link: bool
) -> None:
    """Read between its two writes, the file says client2 has 2 bytes: a valid config, wrong.
    (Through a symlinked config, the events name the file it points to: read half-written.)"""
    cut = TWO.index("GiB", TWO.index("client2"))
    if through_link:
        real = conf.with_name("resource-config.v1.txt")
        conf.rename(real)
        conf.symlink_to(real.name)
    written: asyncio.Queue[logging.LogRecord] = asyncio.Queue()
    waiting = _Queue(written)
    waiting.setLevel(logging.DEBUG)
    logger = logging.getLogger("gemini.config")

    async def body(h: Harness) -> None:
        with conf.open("w") as f:  # (through the link: the file it points to)
            f.write(TWO[:cut])
            f.flush()
            while "being written" not in (await asyncio.wait_for(written.get(), TIMEOUT_S)).msg:
                pass
            f.write(TWO[cut:])
        assert await h.next_config() == parse_text(TWO)
        assert h.configs.empty()

    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(waiting)
    try:
        run_watching(conf, body, settle_s=TIMEOUT_S)
    finally:
        logger.removeHandler(waiting)
        logger.setLevel(level)


def test_a_config_moved_in_from_another_directory_is_read_at_once(
    conf: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """(Seen as a file created, it was awaited as being written: read only after settle_s.)"""
    staged = tmp_path_factory.mktemp("staging") / "new.txt"
    staged.write_text(TWO)

    async def body(h: Harness) -> None:
        os.replace(staged, conf)
        assert await asyncio.wait_for(h.configs.get(), TIMEOUT_S / 2) == parse_text(TWO)

    run_watching(conf, body, settle_s=TIMEOUT_S * 2)


def test_a_config_in_a_symlinked_directory_is_watched(tmp_path: Path) -> None:
    """(The watch was put on the link: no edit was ever seen.)"""
    real = tmp_path / "real"
    real.mkdir()
    (real / "resource-config.txt").write_text(ONE)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)

    async def body(h: Harness) -> None:
        (link / "resource-config.txt").write_text(TWO)
        assert await h.next_config() == parse_text(TWO)

    run_watching(link / "resource-config.txt", body)


def test_deleted_then_recreated(conf: Path) -> None:
    async def body(h: Harness) -> None:
        conf.unlink()
        assert "No such file" in await h.next_error("cannot read")
        conf.write_text(TWO)
        assert await h.next_config() == parse_text(TWO)

    run_watching(conf, body)


def test_yaml_config(tmp_path: Path) -> None:
    path = tmp_path / "gemini.yaml"
    path.write_text("clients: []\n")

    async def body(h: Harness) -> None:
        path.write_text("clients:\n  - {name: a, request: 0.1, limit: 0.2, gpu_mem: 1GiB}\n")
        config = await h.next_config()
        assert config.names == ("a",)

    run_watching(path, body)


def test_given_current_that_is_stale_is_replaced_at_start(conf: Path) -> None:
    async def body(h: Harness) -> None:
        assert await h.next_config() == parse_text(ONE)

    run_watching(conf, body, current=parse_text(THREE))


def test_read_config_errors_name_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.txt"
    with pytest.raises(ConfigError) as info:
        read_config(missing)
    assert (info.value.source, info.value.line) == (str(missing), None)
    assert str(info.value).startswith(f"{missing}: cannot read: ")

    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(ConfigError, match="not UTF-8"):
        read_config(binary)

    bad = tmp_path / "bad.yml"
    bad.write_text("clients: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.yml:1: 'clients' must be a list"):
        read_config(bad)
