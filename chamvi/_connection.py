"""Connecting to Temporal with chamvi's data converter, apart from the worker's heavier modules.

A client command (``chamvi runs list``) imports this and not ``chamvi.runtime``, which loads the app
machinery; the telemetry exporters are imported only for a serving process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfig

if TYPE_CHECKING:
    from chamvi.settings import Settings

__all__ = ["connect"]


async def connect(settings: Settings, *, serving: bool = False) -> Client:
    """A client with chamvi's data converter, honouring Temporal's own profiles and env vars.

    For a ``serving`` process (a worker, the HTTP API), telemetry as the settings ask: with
    ``metrics_address`` or ``otlp_endpoint``, its runtime exports the metrics of every worker built on
    it; with ``otlp_endpoint``, it traces the workflows it starts (and its workers trace what they
    run). A one-shot command (``chamvi dispatch``) exports nothing, so it never takes the metrics
    port of the worker beside it.
    """
    config = ClientConfig.load_client_connect_config()
    if settings.temporal_address:
        config["target_host"] = settings.temporal_address
    config.setdefault("target_host", "localhost:7233")
    if settings.temporal_namespace:
        config["namespace"] = settings.temporal_namespace
    if not serving:
        return await Client.connect(**config, data_converter=pydantic_data_converter)
    from chamvi.telemetry._otel import client_interceptors, temporal_runtime

    return await Client.connect(
        **config,
        data_converter=pydantic_data_converter,
        runtime=temporal_runtime(settings),
        interceptors=client_interceptors(settings),
    )
