"""Records the histories the replay test guards: ``python -m tests.histories.record [NAME ...]``.

Run it after a deliberate, compatible change of a workflow and commit the files; the replay test
then fails any later change that would break runs already in flight. With names, only those files
are written, so the histories recorded by earlier versions stay as they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from qdrant_client import AsyncQdrantClient
from temporalio.client import Client, ScheduleBackfill, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.runtime import Runtime, TelemetryConfig
from temporalio.testing import WorkflowEnvironment

from chamvi import (
    App,
    ApprovalDecision,
    ApprovalTokens,
    Budget,
    ChamviClient,
    FilePart,
    ImagePart,
    Message,
    RecallPolicy,
    RunStatus,
    TextPart,
    ToolContext,
    Trust,
    approve,
    artifact_file_part,
    console_channel,
    define_agent,
    effect_tool,
    extract,
    mcp_server,
    mcp_tools,
    tool,
)
from chamvi._constants import (
    AGENT_CHECK_WORKFLOW,
    AGENT_REGISTRY_WORKFLOW,
    AGENT_STATE_LIST_WORKFLOW,
    CONVERSATION_WORKFLOW,
    KNOWLEDGE_ID_PREFIX,
    KNOWLEDGE_SEARCH_WORKFLOW,
    KNOWLEDGE_SYNC_REQUEST_WORKFLOW,
    LOCK_ID_PREFIX,
    SA_AGENT,
    SA_CONVERSATION,
    SCHEDULE_ID_PREFIX,
    SCHEDULED_RUN_ID_PREFIX,
    SEARCH_ATTRIBUTES,
    UPDATE_KNOWLEDGE_SEARCH,
)
from chamvi.artifacts import ArtifactStore, Attachment
from chamvi.knowledge import define_source, knowledge_collection
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.models import DescribeAgentRequest, ModelSettings, NamedTool
from chamvi.models.conversations import ConversationState, conversation_workflow_id
from chamvi.models.knowledge import SearchRequest, SyncRequest
from chamvi.plugin import ChamviPlugin
from chamvi.providers import ModelRegistry, OpenAIProvider, ScriptedModel, call, calls, reply
from chamvi.providers.scripted import Turn
from chamvi.runtime import build_worker, local_plugin
from chamvi.skills import skill
from tests.knowledge_helpers import (
    collection_state,
    knowledge_worker,
    knowledge_worker_before_pass_workflows,
    pass_workflows,
    wait_for_meta,
    wait_for_passes,
)
from tests.polling import eventually, until_status
from tests.support.openai_server import OpenAIServer, StreamError, stream

HERE = Path(__file__).parent


@tool
async def add(a: int, b: int) -> int:
    """Adds."""
    return a + b


@effect_tool
async def post(body: str) -> str:
    """Posts once."""
    return f"posted {body}"


@tool(trust=Trust(taint=True))
async def read_web(url: str) -> str:
    """Reads untrusted content."""
    return f"page {url}"


@tool
async def deploy(version: str, ctx: ToolContext) -> str:
    """Deploys after approval."""
    decision = await approve(ctx, title=f"Deploy {version}?")
    return "deployed" if decision.approved else f"denied: {decision.reason}"


class Urgency(BaseModel):
    model_config = ConfigDict(extra="forbid")
    urgent: bool


@tool
async def triage(ctx: ToolContext) -> str:
    """Reads a message through an extraction."""
    return str((await extract(ctx, schema=Urgency, content="Server down!")).urgent)


@tool
async def delegate(ctx: ToolContext) -> str:
    """Asks another agent and waits for it."""
    outcome = await ctx.wait_for(await ctx.dispatch("child", {}))
    return str(outcome.output)


@tool
async def announce(ctx: ToolContext) -> str:
    """Sends a message through the run's source channel (its key reaches the run by signal)."""
    await ctx.channels.find_one_or_fail().emit("Release 2.0 is out")
    return "announced"


@tool
async def nap(seconds: float) -> str:
    """Sleeps."""
    await asyncio.sleep(seconds)
    return "rested"


def _app() -> App:
    models = ModelRegistry()
    scripts: dict[str, list[Turn]] = {
        "tools": [
            calls(call("add", a=1, b=2), call("post", body="x")),
            call("read_web", url="u"),
            reply("3"),
        ],
        "approval": [call("deploy", "c1", version="2.0"), reply("ok")],
        "budget": [call("add", a=1, b=1), call("add", a=1, b=1)],
        "locked": [call("nap", seconds=0.2), reply("ok")],
        "slow": [call("nap", seconds=10), reply("late")],
        # a request without tools is the extraction's own model call
        "extract": [
            lambda request: call("triage") if request.tools else reply('{"urgent": true}'),
            reply("ok"),
        ],
        "linked": [call("delegate"), reply("ok")],
        "child": [reply("done")],
        "emits": [call("announce"), reply("ok")],
    }
    agents = []
    for name, turns in scripts.items():
        models.register(f"scripted/{name}", ScriptedModel(turns))
        agents.append(
            define_agent(
                name=name,
                model=f"scripted/{name}",
                instructions="Record.",
                tools=[add, post, read_web, deploy, nap, triage, delegate, announce],
                budget=Budget(max_steps=2, timeout=timedelta(seconds=1 if name == "slow" else 60)),
            )
        )
    return App(agents=agents, models=models, channels=[console_channel(write=lambda line: None)])


failing_once = [True]


async def _pages() -> AsyncIterator[dict[str, str]]:
    if failing_once.pop() if failing_once else False:
        raise RuntimeError("page 1 answered 503")  # the first pass fails and backs off
    yield {"id": "refunds", "content": "Refunds are paid within 14 days."}


async def _record_knowledge(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """Runs a collection through a failed pass, its backoff, a sync request, a search workflow and a
    search update of the collection's workflow."""
    app = App(
        agents=[],
        collections=[
            knowledge_collection("recorded", model="test/hash-16", sources=[define_source(documents=_pages)])
        ],
    )
    store = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
    plugin = ChamviPlugin(app, index=store)
    async with build_worker(env.client, plugin, task_queue=task_queue):
        await plugin.collections_started()
        await wait_for_meta(store, "recorded", "ready")
        await env.client.execute_workflow(
            KNOWLEDGE_SYNC_REQUEST_WORKFLOW,
            SyncRequest(name="recorded"),
            id="record-sync",
            task_queue=task_queue,
        )
        await env.client.execute_workflow(
            KNOWLEDGE_SEARCH_WORKFLOW,
            SearchRequest(collections=["recorded"], query="refunds"),
            id="record-search",
            task_queue=task_queue,
        )
        await env.client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + "recorded").execute_update(
            UPDATE_KNOWLEDGE_SEARCH, SearchRequest(collections=["recorded"], query="refunds")
        )
        await asyncio.sleep(1)
    recorded["knowledge-collection"] = KNOWLEDGE_ID_PREFIX + "recorded"
    recorded["knowledge-sync"] = "record-sync"
    recorded["knowledge-search"] = "record-search"


_timing_fails: list[bool] = [True]


async def _timing_pages() -> AsyncIterator[dict[str, str]]:
    if _timing_fails and _timing_fails.pop():
        raise RuntimeError("page 1 answered 503")  # the first pass fails and backs off
    yield {"id": "refunds", "content": "Refunds are paid within 14 days."}


async def _record_knowledge_timing(
    env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]
) -> None:
    """A collection with a resync: a failed pass, a second worker's start request that skips the
    backoff, then a pass started by the resync timer (a minute after the last successful pass)."""
    collection = knowledge_collection(
        "timed",
        model="test/hash-16",
        sources=[define_source(documents=_timing_pages)],
        resync=timedelta(minutes=1),
    )
    app = App(agents=[], collections=[collection])
    store = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
    first = ChamviPlugin(app, index=store)
    async with build_worker(env.client, first, task_queue=task_queue):
        await first.collections_started()
        await wait_for_passes(env.client, "timed", 1)
        second = ChamviPlugin(app, index=store)
        other = await Client.connect(  # another process's connection: one worker per queue per runtime
            env.client.service_client.config.target_host,
            data_converter=pydantic_data_converter,
            runtime=Runtime(telemetry=TelemetryConfig()),
        )
        async with build_worker(other, second, task_queue=task_queue):
            await second.collections_started()
            await wait_for_passes(env.client, "timed", 2)
        await wait_for_passes(env.client, "timed", 3, seconds=150)
    recorded["knowledge-timing"] = KNOWLEDGE_ID_PREFIX + "timed"


_passes_fail: list[bool] = [True, False]  # popped from the end: the second pass fails


async def _passes_pages() -> AsyncIterator[dict[str, str]]:
    if _passes_fail and _passes_fail.pop():
        raise RuntimeError("page 1 answered 503")
    yield {"id": "refunds", "content": "Refunds are paid within 14 days."}


async def _record_knowledge_passes(
    env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]
) -> None:
    """Passes as workflows: a collection indexed by a worker from before them (its pass an activity)
    moves over with the next worker's start request (the run continues as new), whose first pass
    workflow fails and backs off, the next one finishes, and a sync request makes one more."""
    source = define_source(documents=_passes_pages)
    app = App(agents=[], collections=[knowledge_collection("moved", model="test/hash-16", sources=[source])])
    store = KnowledgeIndex(AsyncQdrantClient(location=":memory:"))
    async with knowledge_worker_before_pass_workflows(env.client, app, store, task_queue):
        await wait_for_passes(env.client, "moved", 1)
        first_run = (await env.client.get_workflow_handle(KNOWLEDGE_ID_PREFIX + "moved").describe()).run_id
    async with knowledge_worker(env.client, app, store, task_queue):

        async def moved_and_passed() -> bool | None:
            state = await collection_state(env.client, "moved")
            return True if state.passes >= 2 and not state.running and state.error is None else None

        await eventually(moved_and_passed, "the moved collection's second pass workflow", seconds=60)
        await ChamviClient(env.client, task_queue=task_queue).knowledge.sync("moved")
        await wait_for_passes(env.client, "moved", 3)

        async def three_passes() -> list[str] | None:
            ids = [execution.id for execution in await pass_workflows(env.client, "moved")]
            return ids if len(ids) == 3 else None

        failed, passed, _ = await eventually(three_passes, "three pass workflows listed")
    recorded["knowledge-pass-move"] = KNOWLEDGE_ID_PREFIX + "moved"
    RUN_IDS["knowledge-pass-move"] = first_run
    recorded["knowledge-pass-collection"] = KNOWLEDGE_ID_PREFIX + "moved"
    recorded["knowledge-pass-failed"] = failed
    recorded["knowledge-pass"] = passed


async def _record_agent_checks(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """Asks the worker about an agent its app serves and about one it does not."""
    for name, agent in (("agent-check", "tools"), ("agent-check-unknown", "nosuch")):
        with contextlib.suppress(WorkflowFailureError):
            await env.client.execute_workflow(
                AGENT_CHECK_WORKFLOW,
                DescribeAgentRequest(agent=agent),
                id=f"record-{name}",
                task_queue=task_queue,
            )
        recorded[name] = f"record-{name}"


async def _record_mcp(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run that lists the tools of the test MCP server (stdio) and calls one."""
    models = ModelRegistry()
    models.register("scripted/mcp", ScriptedModel([call("lookup", topic="refunds"), reply("ok")]))
    with tempfile.TemporaryDirectory() as folder:
        server = mcp_server(
            "handbook",
            command=[sys.executable, "-m", "tests.support.mcp_server"],
            env={"MCP_TEST_DIR": folder, "PYTHONPATH": str(HERE.parents[1])},
        )
        app = App(
            agents=[
                define_agent(name="mcp", model="scripted/mcp", instructions="x", tools=mcp_tools("handbook"))
            ],
            models=models,
            mcp_servers=[server],
        )
        async with build_worker(env.client, app, task_queue=task_queue):
            chamvi = ChamviClient(env.client, task_queue=task_queue)
            recorded["mcp"] = (await chamvi.wait((await chamvi.dispatch("mcp")).run_id)).run_id


async def _record_mcp_files(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run of the npm "everything" server: tools listed with annotations, an image result as a file."""
    everything = HERE.parents[1] / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-everything"
    models = ModelRegistry()
    turns = [call("get-tiny-image"), call("echo", message="hi"), reply("ok")]
    models.register("scripted/files", ScriptedModel(turns))
    tools = mcp_tools("everything")
    agent = define_agent(name="files", model="scripted/files", instructions="x", tools=tools)
    app = App(
        agents=[agent],
        models=models,
        mcp_servers=[mcp_server("everything", command=[str(everything)])],
    )
    async with build_worker(env.client, app, task_queue=task_queue):
        chamvi = ChamviClient(env.client, task_queue=task_queue)
        recorded["mcp-files"] = (await chamvi.wait((await chamvi.dispatch("files")).run_id)).run_id


async def _record_streams(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """Runs whose model stream breaks: mid-answer (finish reason error) and without a finish."""
    call_fragment = {
        "index": 0,
        "id": "c1",
        "type": "function",
        "function": {"name": "add", "arguments": "{}"},
    }
    with OpenAIServer() as server:
        server.add(
            stream("Hal", StreamError("overloaded")),
            stream({"tool_calls": [call_fragment]}, finish_reason=None),
        )
        provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
        app = App(
            agents=[define_agent(name="streamed", model="openai/test", instructions="x", tools=[add])],
            models=ModelRegistry(providers={"openai": provider.model}),
        )
        async with build_worker(env.client, app, task_queue=task_queue):
            chamvi = ChamviClient(env.client, task_queue=task_queue)
            for name in ("stream-broken", "stream-incomplete"):
                recorded[name] = (await chamvi.wait((await chamvi.dispatch("streamed")).run_id)).run_id


@tool
async def file_report(ctx: ToolContext) -> str:
    """Puts a file beside the run's attachment."""
    return (await ctx.artifacts.put("text/markdown", "# report", filename="report.md")).id


async def _record_artifacts(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run dispatched with an attachment whose tool puts a file: references only in its history."""
    models = ModelRegistry()
    models.register("scripted/artifacts", ScriptedModel([call("file_report"), reply("filed")]))
    agent = define_agent(
        name="artifacts", model="scripted/artifacts", instructions="File.", tools=[file_report]
    )
    store = ArtifactStore.memory()
    async with build_worker(
        env.client, App(agents=[agent], models=models), task_queue=task_queue, artifacts=store
    ):
        chamvi = ChamviClient(env.client, task_queue=task_queue, artifacts=store)
        dispatched = await chamvi.dispatch("artifacts", attachments=[Attachment(b"%PDF-1.4", "invoice.pdf")])
        recorded["artifacts"] = (await chamvi.wait(dispatched.run_id)).run_id


@tool
async def render_chart(ctx: ToolContext) -> list[str | FilePart]:
    """Puts a chart and hands it to the model as a file part."""
    chart = await ctx.artifacts.put("image/png", b"\x89PNG-chart", filename="chart.png")
    return ["The chart:", artifact_file_part(chart)]


async def _record_content_parts(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run whose instructions are native messages with parts and whose tool returns a file part."""
    models = ModelRegistry()
    models.register("scripted/parts", ScriptedModel([call("render_chart"), reply("a dip on Tuesday")]))
    instructions = [
        Message(role="system", content="You read charts."),
        Message(
            role="user",
            parts=[
                TextPart(text="A chart that looks fine:"),
                ImagePart(
                    media_type="image/png",
                    data=b"\x89PNG-example",
                    provider_options={"openai": {"detail": "low"}},
                ),
            ],
        ),
        Message(role="assistant", content="Fine: no dip."),
    ]
    agent = define_agent(
        name="parts", model="scripted/parts", instructions=instructions, tools=[render_chart]
    )
    store = ArtifactStore.memory()
    async with build_worker(
        env.client, App(agents=[agent], models=models), task_queue=task_queue, artifacts=store
    ):
        chamvi = ChamviClient(env.client, task_queue=task_queue, artifacts=store)
        recorded["content-parts"] = (await chamvi.wait((await chamvi.dispatch("parts")).run_id)).run_id


async def _record_model_settings(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run whose agent has model settings: each model step records them, the tool choice given way
    to auto after the first tool result; and a run of it with its own settings over the agent's."""
    models = ModelRegistry()
    models.register("scripted/settings", ScriptedModel([call("add", a=2, b=3), reply("5")] * 2))
    settings = ModelSettings(
        temperature=0.2, max_output_tokens=100, tool_choice=NamedTool(tool="add"), extra_body={"top_k": 5}
    )
    agent = define_agent(
        name="settings", model="scripted/settings", instructions="Add.", tools=[add], model_settings=settings
    )
    async with build_worker(env.client, App(agents=[agent], models=models), task_queue=task_queue):
        chamvi = ChamviClient(env.client, task_queue=task_queue)
        recorded["model-settings"] = (await chamvi.wait((await chamvi.dispatch("settings")).run_id)).run_id
        own = ModelSettings(temperature=0.9, parallel_tool_calls=False)
        dispatched = await chamvi.dispatch("settings", model_settings=own)
        recorded["run-model-settings"] = (await chamvi.wait(dispatched.run_id)).run_id


async def _record_skills(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run that loads a skill and reads one of its files: its spec records the catalog version."""
    models = ModelRegistry()
    turns: list[Turn] = [
        call("skill_load", name="refund-procedure"),
        call("skill_read", name="refund-procedure", path="references/policy.md"),
        reply("refunded as the procedure says"),
    ]
    models.register("scripted/skills", ScriptedModel(turns))
    procedure = skill(
        name="refund-procedure",
        description="How to refund an order.",
        instructions="Read references/policy.md, then refund at most the order's total.",
        files={"references/policy.md": "Refunds within 30 days."},
    )
    agent = define_agent(name="skills", model="scripted/skills", instructions="Help.", skills=[procedure])
    async with build_worker(env.client, App(agents=[agent], models=models), task_queue=task_queue):
        chamvi = ChamviClient(env.client, task_queue=task_queue)
        recorded["skills"] = (await chamvi.wait((await chamvi.dispatch("skills")).run_id)).run_id


class Note(BaseModel):
    text: str


async def _record_state(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run that writes to and lists an agent's state collection, and a listing from outside a run."""
    models = ModelRegistry()
    turns: list[Turn] = [
        call("state_notes_upsert", key="n1", item={"text": "remember me"}),
        call("state_notes_list"),
        reply("ok"),
    ]
    models.register("scripted/state", ScriptedModel(turns))
    agent = define_agent(name="state", model="scripted/state", instructions="x", state={"notes": Note})
    async with build_worker(env.client, App(agents=[agent], models=models), task_queue=task_queue):
        chamvi = ChamviClient(env.client, task_queue=task_queue)
        recorded["state"] = (await chamvi.wait((await chamvi.dispatch("state")).run_id)).run_id
        await chamvi.state.list("state", "notes")
    async for execution in env.client.list_workflows(f'WorkflowType = "{AGENT_STATE_LIST_WORKFLOW}"'):
        recorded["state-list"] = execution.id


async def _record_scheduled_run(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """One fire of an agent schedule (a backfill over a past cron time): dispatch, then wait for the run."""
    chamvi = ChamviClient(env.client, task_queue=task_queue)
    await chamvi.schedules.create("tools", cron="0 0 1 1 *", id="record-schedule")
    fire = datetime(2026, 1, 1, tzinfo=UTC)
    await env.client.get_schedule_handle(SCHEDULE_ID_PREFIX + "record-schedule").backfill(
        ScheduleBackfill(start_at=fire - timedelta(minutes=1), end_at=fire + timedelta(minutes=1))
    )
    workflow_id = f"{SCHEDULED_RUN_ID_PREFIX}record-schedule-2026-01-01T00:00:00Z"

    async def fired() -> bool | None:
        async for execution in env.client.list_workflows(f'WorkflowId = "{workflow_id}"'):
            if execution.status == WorkflowExecutionStatus.COMPLETED:
                return True
        return None

    await eventually(fired, "the scheduled fire")
    await chamvi.schedules.delete("record-schedule")
    recorded["scheduled-run"] = workflow_id


RUN_IDS: dict[str, str] = {}
"""The run of a recorded workflow id when its history is not its latest run's (before a continue-as-new)."""


async def _record_conversation(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A conversation across a continue-as-new: a recalled follow-up, a turn that waits for an
    approval while the next message queues, a resent message id the workflow forgot (looked up in the
    store), and a summary of the turns that fell out of the recall."""
    from tests.apps.chat import make_app

    store = ArtifactStore.memory()
    app = make_app(recall=RecallPolicy(max_messages=4, summarizer="scripted/summarizer"))
    workflow_id = conversation_workflow_id("chat", "recorded")
    await env.client.start_workflow(
        CONVERSATION_WORKFLOW,
        ConversationState(agent="chat", id="recorded", turns_per_run=3, remember_ids=2),
        id=workflow_id,
        task_queue=task_queue,
        search_attributes=TypedSearchAttributes(
            [SearchAttributePair(SA_AGENT, "chat"), SearchAttributePair(SA_CONVERSATION, "recorded")]
        ),
    )
    async with build_worker(env.client, app, task_queue=task_queue, artifacts=store):
        chamvi = ChamviClient(env.client, task_queue=task_queue, artifacts=store)
        first = await chamvi.conversations.send("chat", "hello", conversation="recorded", message_id="m-0")
        await chamvi.conversations.wait_turn(first)
        asking = await chamvi.conversations.send(
            "chat", "refund it", conversation="recorded", message_id="m-1"
        )
        await chamvi.conversations.turn_started(asking.run_id)
        await until_status(chamvi, asking.run_id, RunStatus.WAITING)
        queued = await chamvi.conversations.send(
            "chat", "and then?", conversation="recorded", message_id="m-2"
        )
        await chamvi.approvals.approve(asking.run_id, approved=True)
        await chamvi.conversations.wait_turn(queued)
        async for execution in env.client.list_workflows(f'WorkflowId = "{workflow_id}"'):
            RUN_IDS["conversation-first"] = execution.run_id  # the oldest run is listed last
        for index in range(3, 5):
            sent = await chamvi.conversations.send(
                "chat", f"m{index}", conversation="recorded", message_id=f"m-{index}"
            )
            await chamvi.conversations.wait_turn(sent)
        resent = await chamvi.conversations.send("chat", "hello", conversation="recorded", message_id="m-0")
        assert not resent.created
    recorded["conversation-first"] = workflow_id
    recorded["conversation"] = workflow_id
    recorded["conversation-turn"] = asking.run_id  # a turn that recalls the one before and waits for a person


@tool
async def release(ctx: ToolContext) -> str:
    """Asks the console twice; the tokens the two requests carry answer them."""
    console = ctx.channels.find_one_or_fail("console")
    tagged = await console.approve(title="Tag 2.0?")
    published = await console.approve(title="Publish 2.0?")
    return "released" if tagged.approved and published.approved else "held"


async def _record_approval_token(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """A run whose two channel approvals are answered by token (``resume``): the second tool call
    carries the call's wait count, which the second request's token names."""
    lines: list[str] = []
    tokens = ApprovalTokens("record-approval-secret-0123456789abcdef")
    models = ModelRegistry()
    models.register("scripted/release", ScriptedModel([call("release", "c1"), reply("ok")]))
    agent = define_agent(name="release", model="scripted/release", instructions="x", tools=[release])
    app = App(agents=[agent], models=models, channels=[console_channel(write=lines.append)])
    chamvi = ChamviClient(env.client, task_queue=task_queue, approval_tokens=tokens)
    async with build_worker(env.client, local_plugin(app, approval_tokens=tokens), task_queue=task_queue):
        run_id = (await chamvi.dispatch("release", channel="console", address="ops")).run_id
        for n in (1, 2):

            async def sent(n: int = n) -> list[str] | None:
                found = re.findall(r"--token (\S+)`", "\n".join(lines))
                return found if len(found) == n else None

            await chamvi.approvals.resume(
                (await eventually(sent, f"approval request {n}"))[-1], ApprovalDecision(approved=True)
            )
        await chamvi.wait(run_id)
    recorded["approval-token"] = run_id


async def _record_runs(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """The runs of ``_app()``'s agents, on the main worker's task queue."""
    chamvi = ChamviClient(env.client, task_queue=task_queue)
    for agent in ("tools", "budget", "slow", "extract", "linked"):
        recorded[agent] = (await chamvi.dispatch(agent)).run_id
    recorded["emits"] = (await chamvi.dispatch("emits", channel="console", address="ops")).run_id
    approved = (await chamvi.dispatch("approval")).run_id
    await until_status(chamvi, approved, RunStatus.WAITING)
    await chamvi.approvals.approve(approved, approved=True)
    recorded["approval"] = approved
    recorded["approval-input-bound"] = approved  # decisions bound to the call's input
    cancelled = (await chamvi.dispatch("approval")).run_id
    await until_status(chamvi, cancelled, RunStatus.WAITING)
    await chamvi.cancel(cancelled)
    recorded["cancelled"] = cancelled
    locked = [(await chamvi.dispatch("locked", concurrency_key="k")).run_id for _ in range(2)]
    recorded["locked"] = locked[1]
    for run_id in [*recorded.values(), *locked]:
        await chamvi.wait(run_id)
    recorded["lock"] = LOCK_ID_PREFIX + "k"


async def _record_runtime_agents(env: WorkflowEnvironment, task_queue: str, recorded: dict[str, str]) -> None:
    """An agent put at runtime (the ``AgentRegistry`` workflow) and a run of it that calls a tool,
    waits for an approval while revision 2 is put, and finishes on revision 1."""
    models = ModelRegistry()
    turns: list[Turn] = [call("add", a=1, b=2), call("deploy", "c1", version="2.0"), reply("done")]
    models.register("scripted/runtime", ScriptedModel(turns))
    app = App(agents=[], models=models, runtime_tools=[add, deploy])
    async with build_worker(env.client, app, task_queue=task_queue):
        chamvi = ChamviClient(env.client, task_queue=task_queue)
        definition = {"model": "scripted/runtime", "instructions": "Deploy.", "tools": ["add", "deploy"]}
        await chamvi.agents.put("runtime", definition)
        run_id = (await chamvi.dispatch("runtime")).run_id
        await until_status(chamvi, run_id, RunStatus.WAITING)
        await chamvi.agents.put("runtime", {**definition, "tools": ["add"]})
        await chamvi.approvals.approve(run_id, approved=True)
        recorded["runtime-agent"] = (await chamvi.wait(run_id)).run_id
    async for execution in env.client.list_workflows(f'WorkflowType = "{AGENT_REGISTRY_WORKFLOW}"'):
        recorded["agent-registry"] = execution.id


Recorder = Callable[[WorkflowEnvironment, str, dict[str, str]], Awaitable[None]]

RECORDERS: list[tuple[tuple[str, ...], str, Recorder]] = [
    (
        (
            "tools",
            "budget",
            "slow",
            "extract",
            "linked",
            "emits",
            "approval",
            "approval-input-bound",
            "cancelled",
            "locked",
            "lock",
        ),
        "",
        _record_runs,
    ),
    (("agent-check", "agent-check-unknown"), "", _record_agent_checks),
    (("knowledge-collection", "knowledge-sync", "knowledge-search"), "-knowledge", _record_knowledge),
    (("knowledge-timing",), "-timing", _record_knowledge_timing),
    (
        ("knowledge-pass-move", "knowledge-pass-collection", "knowledge-pass-failed", "knowledge-pass"),
        "-passes",
        _record_knowledge_passes,
    ),
    (("mcp",), "-mcp", _record_mcp),
    (("mcp-files",), "-mcp-files", _record_mcp_files),
    (("stream-broken", "stream-incomplete"), "-streams", _record_streams),
    (("artifacts",), "-artifacts", _record_artifacts),
    (("content-parts",), "-parts", _record_content_parts),
    (("model-settings", "run-model-settings"), "-settings", _record_model_settings),
    (("skills",), "-skills", _record_skills),
    (("scheduled-run",), "", _record_scheduled_run),
    (("state", "state-list"), "-state", _record_state),
    (
        ("conversation-first", "conversation", "conversation-turn"),
        "-conversation",
        _record_conversation,
    ),
    (("approval-token",), "-approval-token", _record_approval_token),
    (("runtime-agent", "agent-registry"), "-runtime-agents", _record_runtime_agents),
]
"""Each recorder, the histories it records, and its task queue's suffix; with names on the command
line, only the recorders of those names run."""


async def main() -> None:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=shutil.which("temporal"),
        search_attributes=SEARCH_ATTRIBUTES,
        data_converter=pydantic_data_converter,
    )
    task_queue = f"record-{uuid.uuid4().hex[:8]}"
    recorded: dict[str, str] = {}
    wanted = set(sys.argv[1:])
    async with build_worker(env.client, _app(), task_queue=task_queue):
        for names, suffix, recorder in RECORDERS:
            if not wanted or wanted & set(names):
                await recorder(env, f"{task_queue}{suffix}", recorded)
        for name, workflow_id in recorded.items():
            if wanted and name not in wanted:
                continue
            handle = env.client.get_workflow_handle(workflow_id, run_id=RUN_IDS.get(name))
            history = await handle.fetch_history()
            (HERE / f"{name}.json").write_text(history.to_json())
            print(f"recorded {name}: {len(history.events)} events")
    await env.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
