"""Reading the resource config file and noticing when it changes.

The watch is on the config's *directory*, not the file: editors and config tools that write a
temporary file and rename it over the config replace the inode, which a watch on the file itself
(or the original's `IN_CLOSE_WRITE` on the name) never sees.  Watchdog's observer thread only pokes
the event loop; reading, parsing and deciding happen on the loop, after a short debounce so that
one save (create + modify + close + move) is one reload.

A file written in place (truncate, write, close) is read when its writer closes it, or once it has
had no write for `settle_s`: read in the middle of the write, a cut-off YAML list or the first lines
of a text file can parse as a valid config that silently drops clients.

A bad edit is logged once and ignored: the daemon keeps running on the last good config.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_CREATED,
    EVENT_TYPE_DELETED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

from gemini.core.config import ConfigError, ResourceConfig, diff, parse

log = logging.getLogger("gemini.config")

# Opened / closed-without-write / attribute changes cannot change the content.
_CONTENT_EVENTS = frozenset({
    EVENT_TYPE_CREATED,
    EVENT_TYPE_MODIFIED,
    EVENT_TYPE_MOVED,
    EVENT_TYPE_CLOSED,
    EVENT_TYPE_DELETED,
})
# Events on the config itself that mean a writer has it open and its content may be partial.
_WRITING_EVENTS = frozenset({EVENT_TYPE_CREATED, EVENT_TYPE_MODIFIED})
_STOP_JOIN_S = 2.0


def read_config(path: Path) -> ResourceConfig:
    """Read and parse `path` (YAML by suffix); every failure is a ConfigError naming the path."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), None, f"not UTF-8 text: {exc.reason}") from None
    return parse(text, str(path))


def _observer() -> BaseObserver:
    """inotify with whole events where there is one: a file moved in from a directory not
    watched is then a move, not a creation (which is awaited as being written, for 1 s).
    watchdog's Observer is inotify's on Linux; elsewhere, or in a watchdog without whole
    events, it takes no such argument."""
    try:
        return Observer(generate_full_events=True)  # type: ignore[call-arg]
    except TypeError:
        return Observer()


class _Poker(FileSystemEventHandler):
    """Runs in watchdog's thread: filters events and wakes the loop, nothing else."""

    def __init__(
        self,
        names: Callable[[], set[str]],
        relevant: Callable[[FileSystemEvent, set[str]], bool],
        poke: Callable[[bool], None],
    ):
        self._names = names
        self._relevant = relevant
        self._poke = poke

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CONTENT_EVENTS:
            return
        names = self._names()
        if self._relevant(event, names):
            writing = (event.event_type in _WRITING_EVENTS
                       and os.fsdecode(event.src_path) in names)
            self._poke(writing)


class ConfigWatcher:
    """Calls `on_config(new)` on the loop each time the file parses to a config different from
    the last good one.  `start()` and `stop()` belong to the loop's thread.

    `current` is the config the caller already runs on (usually from `read_config`); without it the
    file's content at `start()` is the baseline.  Either way the first call is for a real change.
    `validate` may refuse a config that parses (ConfigError): it is reported like a parse error
    and the last good config stays.
    """

    def __init__(
        self,
        path: Path,
        loop: asyncio.AbstractEventLoop,
        on_config: Callable[[ResourceConfig], None],
        debounce_s: float = 0.05,
        *,
        settle_s: float = 1.0,
        current: ResourceConfig | None = None,
        validate: Callable[[ResourceConfig], None] | None = None,
    ) -> None:
        # absolute(), not resolve(): the name is what gets renamed over, even through a symlink.
        self.path = Path(os.path.abspath(path))
        # The directory watched, resolved: a watch on a symlink to a directory saw nothing.
        self._watch_dir = os.path.realpath(self.path.parent)
        self._loop = loop
        self._on_config = on_config
        self._debounce_s = debounce_s
        self._settle_s = settle_s  # how long a write with no close may pause before it is read
        self._current = current
        self._validate = validate  # raises ConfigError for a config the caller cannot run
        self._last_error: str | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._observer: BaseObserver | None = None

    # ---- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        observer = _observer()
        poker = _Poker(self._names, self._is_relevant, self._poke_threadsafe)
        observer.schedule(poker, self._watch_dir)
        observer.start()  # the inotify watch exists when this returns
        self._observer = observer
        # Read after the watch is in place, so an edit in between is seen one way or the other.
        if self._current is None:
            try:
                self._current = read_config(self.path)
            except ConfigError as exc:
                self._report(exc)
        else:
            self._poke()  # compare with what the caller read earlier, on the loop as usual

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(_STOP_JOIN_S)

    # ---- watchdog thread ------------------------------------------------------------------------

    def _names(self) -> set[str]:
        """The paths events name the config by: as given, in the resolved directory, and the
        file a symlinked config points to now (written through the link, events name it)."""
        return {str(self.path), os.path.join(self._watch_dir, self.path.name),
                os.path.realpath(self.path)}

    def _is_relevant(self, event: FileSystemEvent, names: set[str]) -> bool:
        paths = {os.fsdecode(event.src_path), os.fsdecode(getattr(event, "dest_path", "") or "")}
        if paths & names:
            return True
        # A symlinked config (e.g. a Kubernetes ConfigMap) changes when a link *next to it* is
        # swapped; any event in the directory may be that, and an unchanged re-read is harmless.
        return self.path.is_symlink()

    def _poke_threadsafe(self, writing: bool) -> None:
        # RuntimeError: the loop closed while we were stopping; there is nobody left to tell.
        with contextlib.suppress(RuntimeError):
            self._loop.call_soon_threadsafe(self._poke, writing)

    # ---- loop thread ----------------------------------------------------------------------------

    def _poke(self, writing: bool = False) -> None:
        """A content event; `writing`: the config itself was created or written to and its close
        is still to come, so the read waits for that close (any other event) or `settle_s`."""
        if self._observer is None:  # stopped after the event was queued
            return
        if self._timer is not None:
            self._timer.cancel()
        if writing:
            log.debug("config %s is being written; reading it once closed", self.path)
        delay = self._settle_s if writing else self._debounce_s
        self._timer = self._loop.call_later(delay, self._reload)

    def _reload(self) -> None:
        self._timer = None
        try:
            config = read_config(self.path)
            if self._validate is not None:
                self._validate(config)
        except ConfigError as exc:
            self._report(exc)
            return
        if self._last_error is not None:
            log.info("config %s is valid again", self.path)
            self._last_error = None
        if config == self._current:
            return
        if self._current is not None:
            d = diff(self._current, config)
            log.debug("config %s: added %s, removed %s, changed %s",
                      self.path, d.added, d.removed, d.changed)
        self._current = config
        self._on_config(config)

    def _report(self, exc: ConfigError) -> None:
        # One line per distinct problem: unrelated events in the directory re-read the same file.
        message = str(exc)
        if message != self._last_error:
            log.error("%s; keeping the last good config", message)
            self._last_error = message
