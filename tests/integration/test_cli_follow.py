"""``chamvi runs watch`` and ``chamvi dispatch --follow`` against a real worker, a real Temporal dev server
and, for the model's live text, the HTTP API served in the worker's process as ``chamvi dev`` does."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from temporalio.client import Client

from chamvi import App, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi.cli import cli
from chamvi.http import create_api
from chamvi.providers import ModelRegistry, OpenAIProvider
from chamvi.runtime import local_plugin
from tests.polling import until_status
from tests.support.http_api import make_tokens, serving
from tests.support.openai_server import OpenAIServer, StreamError, stream, tool_call


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys a version after a person approves."""
    decision = await approve(ctx, title=f"Deploy {version}?")
    return f"deployed {version}" if decision.approved else "not deployed"


@pytest.fixture(autouse=True)
def data_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No `chamvi dev` token here: without --api, the CLI follows through Temporal."""
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    return tmp_path


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as started:
        yield started


@pytest.fixture
def agent() -> str:
    return f"deployer-{uuid.uuid4().hex[:8]}"


def app_for(server: OpenAIServer, agent: str) -> App:
    provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
    return App(
        agents=[define_agent(name=agent, model="openai/test-model", instructions="Deploy.", tools=[deploy])],
        models=ModelRegistry(providers={"openai": provider.model}),
    )


@pytest.fixture
def chamvi_cli(client: Client, task_queue: str) -> Callable[..., asyncio.Future[Result]]:
    """The CLI in a thread of its own (it runs ``asyncio.run``) while the worker runs on the test's loop."""
    address = client.service_client.config.target_host

    def run(*args: str) -> asyncio.Future[Result]:
        argv = [*args, "--address", address, "--namespace", client.namespace, "--task-queue", task_queue]
        return asyncio.ensure_future(asyncio.to_thread(CliRunner().invoke, cli, argv))

    return run


async def test_runs_watch_prints_the_models_text_as_written_and_each_step_and_approval_through_the_api(
    chamvi: ChamviClient, running_worker, server: OpenAIServer, agent: str, chamvi_cli
) -> None:
    server.add(tool_call("deploy", {"version": "1.2"}), stream("Deployed ", "1.2", " to prod."))
    plugin = local_plugin(app_for(server, agent))
    tokens = make_tokens(reader=["runs:read"])
    api = create_api(tokens=list(tokens.values()), managed=None, runs=chamvi, events=plugin.runtime.events)
    async with running_worker(plugin), serving(api) as url:
        run_id = (await chamvi.dispatch(agent, {"version": "1.2"})).run_id
        watching = chamvi_cli("runs", "watch", run_id, "--api", url, "--token", tokens["reader"].value)
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.approvals.approve(run_id, approved=True, reason="ship it")
        watched = await watching

    assert watched.exit_code == 0, watched.output
    assert watched.stdout == "Deployed 1.2 to prod.\n"
    lines = watched.stderr.splitlines()
    assert lines[0] == f"run {run_id} started"
    assert lines[1] == 'step 0: calls deploy({"version": "1.2"})'
    assert lines[2].startswith("waiting for approval 0:call_1:0: Deploy 1.2? (tool deploy, until 20")
    assert lines[2].endswith(f"answer with `chamvi approve {run_id}` or `--deny`")
    assert lines[3:] == ["approved 0:call_1:0 (ship it): the run goes on", "step 0: deploy -> deployed 1.2"]


async def test_dispatch_follow_through_temporal_prints_each_step_and_exits_with_the_runs_failure(
    running_worker, server: OpenAIServer, agent: str, chamvi_cli
) -> None:
    server.add(stream("Deplo", StreamError("the model server is overloaded")))
    async with running_worker(app_for(server, agent)):
        followed = await chamvi_cli("dispatch", agent, "--payload", '{"version": "1.2"}', "--follow")

    assert followed.exit_code == 1
    run_id, text = followed.stdout.splitlines()
    assert text == "Deplo"  # the text so far, from the step (no live text without the API)
    assert "without the model's live text" not in followed.stderr  # no API was configured to try
    assert followed.stderr.splitlines()[-1] == (
        f"Error: run {run_id} failed: provider_unavailable: the stream of 'openai/test-model' at "
        f"{server.url}/v1/ failed: the model server is overloaded"
    )


async def test_runs_watch_json_prints_every_event_as_one_json_line(
    chamvi: ChamviClient, running_worker, server: OpenAIServer, agent: str, chamvi_cli
) -> None:
    server.add(tool_call("deploy", {"version": "1.2"}))
    async with running_worker(app_for(server, agent)):
        run_id = (await chamvi.dispatch(agent, {"version": "1.2"})).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.cancel(run_id)
        watched = await chamvi_cli("runs", "watch", run_id, "--json")

    assert watched.exit_code == 1
    events = [line.split('"type": "')[1].split('"')[0] for line in watched.stdout.splitlines()]
    assert events == ["run.started", "run.step", "run.waiting", "run.cancelled"]


async def test_an_api_without_a_token_is_refused_before_anything_is_followed(chamvi_cli) -> None:
    refused = await chamvi_cli("runs", "watch", "some-run", "--api", "http://127.0.0.1:9")
    assert refused.exit_code == 1
    assert "--api needs a token with runs:read: pass --token or set CHAMVI_API_TOKEN" in refused.stderr


async def test_with_no_dev_api_up_the_cli_follows_through_temporal_and_says_so(
    chamvi: ChamviClient, running_worker, server: OpenAIServer, agent: str, chamvi_cli, data_folder: Path
) -> None:
    (data_folder / "api-token").write_text("a-token-of-a-stopped-chamvi-dev\n")
    with socket.socket() as free:  # a port nothing listens on once this block ends
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    server.add(stream("Nothing to deploy."))
    async with running_worker(app_for(server, agent)):
        run_id = (await chamvi.dispatch(agent, {"version": "1.2"})).run_id
        watched = await chamvi_cli("runs", "watch", run_id, "--api-port", str(port))

    assert watched.exit_code == 0, watched.output
    assert watched.stdout == "Nothing to deploy.\n"
    assert watched.stderr.splitlines()[0] == (
        f"no API at http://127.0.0.1:{port}: following through Temporal, without the model's live text"
    )
