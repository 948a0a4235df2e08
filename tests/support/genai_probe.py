"""A worker process exporting by OTLP as the README sets it up, running one run of an OpenAI-model agent.

    OTEL_EXPORTER_OTLP_ENDPOINT=... TEMPORAL_ADDRESS=... python -m tests.support.genai_probe

It serves the run on a task queue of its own against a scripted OpenAI-compatible server (a tool call,
then an answer), prints the run's id once the run has ended, then stays up so the batched spans and
the runtime's metrics leave on their own schedule; the test stops it.
"""

from __future__ import annotations

import asyncio
import uuid

from chamvi import App, ChamviClient, define_agent, tool
from chamvi._lifecycle import memory_index
from chamvi.providers import ModelRegistry, OpenAIProvider
from chamvi.runtime import build_worker, connect
from chamvi.settings import Settings
from chamvi.telemetry._otel import exporting_traces
from tests.support.openai_server import OpenAIServer, text, tool_call


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


async def main(settings: Settings, server: OpenAIServer) -> None:
    provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
    models = ModelRegistry(providers={"openai": provider.model})
    agent = define_agent(name="adder", model="openai/test-model", instructions="Add.", tools=[add])
    app = App(agents=[agent], models=models)
    client = await connect(settings, serving=True)
    task_queue = f"genai-{uuid.uuid4().hex[:8]}"
    async with build_worker(client, app, task_queue=task_queue, index=memory_index()):
        chamvi = ChamviClient(client, task_queue=task_queue)
        run = await chamvi.wait((await chamvi.dispatch("adder")).run_id)
        print(run.run_id, run.status.value, flush=True)
        await asyncio.sleep(120)


if __name__ == "__main__":
    settings = Settings.from_env()
    with OpenAIServer() as server, exporting_traces(settings, "chamvi-worker"):
        server.add(tool_call("add", {"a": 2, "b": 3}), text("5"))
        asyncio.run(main(settings, server))
