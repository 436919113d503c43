"""gem-schd's shell: the scheduler core behind a TCP server, reloading its config file, and
following launch-backend's MPS state file (spatial partitions, issue 13)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from gemini.core.config import DEFAULT_GPU, ConfigError, ResourceConfig, gpu_problems
from gemini.core.mps import MpsState
from gemini.core.partitions import PartitionRouter
from gemini.core.scheduler import Timing, describe_timing
from gemini.core.um import UmPolicy, check_oversubscription
from gemini.daemon.clock import ClockSampler, feed_clock, nvml_sm_clock
from gemini.daemon.server import FrameServer

log = logging.getLogger("gemini.schd")
MPS_POLL_S = 1.0  # how often the MPS state file is read (MPS starts and stops rarely)


class SchedulerDaemon:
    def __init__(
        self,
        config: ResourceConfig,
        timing: Timing,
        secret: bytes | None = None,
        um: UmPolicy | None = None,
        spatial: bool = False,
    ) -> None:
        now = time.monotonic()  # (FrameServer.now's clock)
        self.core = PartitionRouter(config, timing, now, um, spatial)
        self.server = FrameServer(self.core, self.core.on_request, self.core.on_disconnect,
                                  secret=secret)

    async def start(self, host: str, port: int) -> int:
        return await self.server.start(host, port)

    def apply_config(self, config: ResourceConfig) -> None:
        log.info("config reloaded: %d clients", len(config.clients))
        self.server.feed("config", "the reloaded config",
                         lambda: self.core.on_config(config, self.server.now()))

    def apply_mps(self, state: MpsState) -> None:
        """MPS went up or down: the partitions' clients change token group at once."""
        if state.spatial == self.core.spatial:
            return
        if state.spatial:
            log.info("MPS is up: partitions hold their tokens side by side")
        else:
            log.info("MPS is off (%s): partitions are time-sliced at their size", state.reason)
        self.server.feed("mps", "MPS's change",
                         lambda: self.core.on_mode(state.spatial, self.server.now()))

    async def close(self) -> None:
        await self.server.close()


async def serve_scheduler(
    config_path: Path,
    timing: Timing,
    host: str,
    port: int,
    stop: asyncio.Event,
    secret: bytes | None = None,
    um: UmPolicy | None = None,
    gpu: str = DEFAULT_GPU,
    metrics_port: int | None = None,
    mps_state: Path | None = None,
    clock: bool = True,
    metrics_host: str | None = None,
    present: list[tuple[int, str]] | None = None,
) -> None:
    """Serve the clients of one GPU (`gpu`, as the config names it) of the config file, and
    /metrics on `metrics_port` (same address) when given.  `mps_state`: launch-backend's MPS
    state file; without it partitions are time-sliced (nobody said MPS runs).  `clock`: read
    the GPU's SM clock, so that caps hold by work (gemini.daemon.clock).  `present`: the
    machine's GPUs as launch-backend found them (gem-schd --present-gpus), to check the
    config's against; None: not checked."""
    from gemini.daemon.watcher import ConfigWatcher, read_config

    um = um if um is not None else UmPolicy()

    def validate(config: ResourceConfig) -> None:
        # The whole file's GPUs, as launch-backend checks them, against the list it found: an
        # edit it refuses (a GPU that is not here, one GPU named two ways) was applied by the
        # other GPUs' schedulers, each of which watches the file too, and the last good config
        # no longer held anywhere.  (Not where no list is given: the Kubernetes agent's file
        # keeps a vanished GPU's pods, and the other GPUs' schedulers must still start.)
        if present is not None and (problems := gpu_problems(config, present)):
            raise ConfigError(str(config_path), None, "; ".join(problems))
        check_oversubscription(config.for_gpu(gpu), um, str(config_path))

    def apply(config: ResourceConfig) -> None:
        daemon.apply_config(config.for_gpu(gpu))

    config = read_config(config_path)
    validate(config)  # a ConfigError here: gem-schd exits 2
    ours = config.for_gpu(gpu)
    state = _mps_state(mps_state)
    if ours.spatial and not state.spatial:
        log.info("the config has partitions and MPS is off (%s): they are time-sliced at their "
                 "size", state.reason)
    daemon = SchedulerDaemon(ours, timing, secret, um, state.spatial)
    bound = await daemon.start(host, port)
    guarded = ", clients must prove the secret" if secret is not None else ""
    log.info("scheduler of GPU %s listening on %s:%d, config %s%s", gpu, host, bound,
             config_path, guarded)
    log.info("%s", describe_timing(timing))
    watcher = ConfigWatcher(config_path, asyncio.get_running_loop(), apply,
                            current=config, validate=validate)
    watcher.start()
    follow = None if mps_state is None else asyncio.ensure_future(
        _follow_mps(mps_state, daemon, stop))
    sampler = _clock_sampler(gpu) if clock else None
    feeding = None if sampler is None else asyncio.ensure_future(
        feed_clock(sampler, daemon.core, daemon.server.feed, daemon.server.now, stop))
    metrics = None
    try:
        if metrics_port is not None:
            from gemini.core.metrics import exposition
            from gemini.daemon.metrics import PAGE_MAX_AGE_S, MetricsServer, cached

            metrics = MetricsServer(cached(
                lambda: exposition(daemon.core.snapshot(daemon.server.now()), gpu),
                PAGE_MAX_AGE_S, daemon.server.now))
            metrics_host = host if metrics_host is None else metrics_host
            bound_metrics = await metrics.start(metrics_host, metrics_port)
            log.info("metrics on http://%s:%d/metrics", metrics_host, bound_metrics)
        await stop.wait()
    finally:
        watcher.stop()
        if follow is not None:
            follow.cancel()
        if feeding is not None and sampler is not None:
            feeding.cancel()
            sampler.stop()
        if metrics is not None:
            await metrics.close()
        await daemon.close()


def _clock_sampler(gpu: str) -> ClockSampler | None:
    read, why = nvml_sm_clock(gpu)
    if read is None:
        log.info("GPU %s's clock is not read (%s): caps are charged in time, not work", gpu, why)
        return None
    log.info("reading GPU %s's SM clock: caps are charged by work", gpu)
    sampler = ClockSampler(read)
    sampler.start()
    return sampler


def _mps_state(path: Path | None) -> MpsState:
    from gemini.daemon.mps import read_state

    return MpsState(False, "gem-schd has no --mps-state") if path is None else read_state(path)


async def _follow_mps(path: Path, daemon: SchedulerDaemon, stop: asyncio.Event) -> None:
    while not stop.is_set():
        daemon.apply_mps(_mps_state(path))
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), MPS_POLL_S)
