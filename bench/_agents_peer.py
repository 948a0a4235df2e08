"""``agent_peers.py``'s peer: the OpenAI Agents SDK on Temporal through temporalio's integration.

temporalio 1.35's ``temporalio.contrib.openai_agents`` forwards to the standalone
``temporalio-openai-agents`` package (``temporalio.openai_agents``), which pins ``openai-agents``
0.22; both install with the ``bench`` extra. Its ``OpenAIAgentsPlugin`` runs every model call as the
activity ``invoke_model_activity`` through the ``ModelProvider`` it is given: here the Agents SDK's own
``OpenAIProvider`` over an ``AsyncOpenAI`` client pointed at the loopback server, in Chat Completions
mode (``use_responses=False``), so both sides send the same API the same requests. The tool is a
Temporal activity made a tool with ``workflow.activity_as_tool``, as the integration's guide does.
The Agents SDK's tracing is off: by default it exports traces to OpenAI, and chamvi exports nothing
without a provider set.

The workflow is in this module, not ``agent_peers.py``, so the sandbox imports it by a real name.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Sequence
from datetime import timedelta

from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import Worker

# passed through: the sandbox re-imports this module for every run, and the peer should pay for its
# own workflow code only, not for re-importing the benchmark's helpers (a user's activity modules are
# passed through the same way)
with workflow.unsafe.imports_passed_through():
    from _agent_workload import API_KEY, INSTRUCTIONS, MODEL, PROMPT, Burst, burst, page_text

PEER = "OpenAI Agents (temporalio)"
WORKFLOW = "bench.AgentsPeer"

try:
    from agents import Agent, Runner
    from agents.models.openai_provider import OpenAIProvider
    from openai import AsyncOpenAI
    from temporalio.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
    from temporalio.openai_agents import workflow as agents_workflow
except ImportError as error:
    MISSING: str | None = f"{error.name or error} is not installed (pip install -e '.[dev,bench]')"
else:
    MISSING = None


@activity.defn(name="fetch_page")
async def fetch_page(page: int) -> str:
    """Returns the text of ``page``."""
    return page_text(page)


@workflow.defn(name=WORKFLOW)
class AgentsPeerWorkflow:
    @workflow.run
    async def run(self, steps: int) -> str:
        tool = agents_workflow.activity_as_tool(fetch_page, start_to_close_timeout=timedelta(seconds=30))
        agent = Agent(name="reader", instructions=INSTRUCTIONS, model=MODEL, tools=[tool])
        result = await Runner.run(agent, input=PROMPT, max_turns=steps + 5)
        return str(result.final_output)


async def measure(
    address: str, model_url: str, runs: int, steps: int, others: Sequence[int], profile: str | None
) -> Burst:
    """One warm-up run, then ``runs`` runs at once, on a client and worker of this process's own."""
    # read by every trace provider, the ones the plugin installs per worker included (set_tracing_disabled
    # only reaches the provider installed when it is called)
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"
    provider = OpenAIProvider(
        openai_client=AsyncOpenAI(base_url=model_url, api_key=API_KEY, max_retries=0), use_responses=False
    )
    plugin = OpenAIAgentsPlugin(
        model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=60)),
        model_provider=provider,
    )
    client = await Client.connect(address, plugins=[plugin])
    task_queue = f"bench-agents-peer-{uuid.uuid4().hex[:8]}"

    async def start() -> str:
        workflow_id = f"peer-{uuid.uuid4().hex}"
        await client.start_workflow(WORKFLOW, steps, id=workflow_id, task_queue=task_queue)
        return workflow_id

    async def finish(workflow_id: str) -> None:
        answer = await client.get_workflow_handle(workflow_id, result_type=str).result()
        if answer != f"read {steps} pages":
            raise RuntimeError(f"peer run {workflow_id!r} answered {answer!r}")

    async with Worker(client, task_queue=task_queue, workflows=[AgentsPeerWorkflow], activities=[fetch_page]):
        await finish(await start())
        return await burst(client, start, finish, runs=runs, steps=steps, others=others, profile=profile)
