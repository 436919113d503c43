"""gem-schd's shell: the scheduler core behind a TCP server, reloading its config file."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from gemini.core.config import DEFAULT_GPU, ResourceConfig
from gemini.core.scheduler import SchedulerCore, Timing
from gemini.core.um import UmPolicy, check_oversubscription
from gemini.daemon.server import FrameServer

log = logging.getLogger("gemini.schd")


class SchedulerDaemon:
    def __init__(
        self,
        config: ResourceConfig,
        timing: Timing,
        secret: bytes | None = None,
        um: UmPolicy | None = None,
    ) -> None:
        self.core = SchedulerCore(config, timing, asyncio.get_running_loop().time(), um)
        self.server = FrameServer(self.core, self.core.on_request, self.core.on_disconnect,
                                  secret=secret)

    async def start(self, host: str, port: int) -> int:
        return await self.server.start(host, port)

    def apply_config(self, config: ResourceConfig) -> None:
        log.info("config reloaded: %d clients", len(config.clients))
        self.server.run(self.core.on_config(config, self.server.now()))

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
) -> None:
    """Serve the clients of one GPU (`gpu`, as the config names it) of the config file, and
    /metrics on `metrics_port` (same address) when given."""
    from gemini.daemon.watcher import ConfigWatcher, read_config

    um = um if um is not None else UmPolicy()

    def validate(config: ResourceConfig) -> None:
        check_oversubscription(config.for_gpu(gpu), um, str(config_path))

    def apply(config: ResourceConfig) -> None:
        daemon.apply_config(config.for_gpu(gpu))

    config = read_config(config_path)
    validate(config)  # a ConfigError here: gem-schd exits 2
    daemon = SchedulerDaemon(config.for_gpu(gpu), timing, secret, um)
    bound = await daemon.start(host, port)
    guarded = ", clients must prove the secret" if secret is not None else ""
    log.info("scheduler of GPU %s listening on %s:%d, config %s%s", gpu, host, bound,
             config_path, guarded)
    watcher = ConfigWatcher(config_path, asyncio.get_running_loop(), apply,
                            current=config, validate=validate)
    watcher.start()
    metrics = None
    try:
        if metrics_port is not None:
            from gemini.core.metrics import exposition
            from gemini.daemon.metrics import MetricsServer

            metrics = MetricsServer(
                lambda: exposition(daemon.core.snapshot(daemon.server.now()), gpu))
            bound_metrics = await metrics.start(host, metrics_port)
            log.info("metrics on http://%s:%d/metrics", host, bound_metrics)
        await stop.wait()
    finally:
        watcher.stop()
        if metrics is not None:
            await metrics.close()
        await daemon.close()
