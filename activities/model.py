"""The model call of one step, and the extractions tool calls ask for."""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from dataclasses import replace

from pydantic import ValidationError as PydanticValidationError
from temporalio import activity

from chamvi._constants import (
    ACTIVITY_CALL_MODEL,
    ACTIVITY_EXTRACT,
    QUERY_EXTRACTION,
    QUERY_MCP_TOOLS,
    QUERY_TRANSCRIPT,
)
from chamvi._heartbeat import heartbeating
from chamvi._run_slots import RunSlots
from chamvi._transcript import EMPTY_DIGEST, TranscriptCache, chain_digest
from chamvi.agents import Agent
from chamvi.conversations.store import ConversationStore, recalled_messages
from chamvi.errors import (
    IncompleteResponseError,
    InvalidRunStateError,
    ModelError,
    ProviderUnavailableError,
    validation_issues,
)
from chamvi.extraction import EXTRACTION_INSTRUCTIONS
from chamvi.models import (
    EffectQuery,
    ExtractInput,
    ExtractionRequest,
    ExtractResult,
    McpToolInfo,
    Message,
    ModelRequest,
    ModelResponse,
    ModelSettings,
    TranscriptQuery,
)
from chamvi.permissions import PolicyRun
from chamvi.providers import AttachedFile, ChatModel, ChatRequest, DeltaKind, OnDelta, ToolSchema
from chamvi.providers._base import refused_settings
from chamvi.run_events import RUN_DELTA, RunEvent
from chamvi.worker_state import AppRuntime


class ModelActivities:
    """Holds the worker's runtime, its transcript cache, and the MCP tools of the runs it served lately.

    The runtime's app holds the providers; the caches spare a query of the run at most steps.
    """

    def __init__(
        self,
        runtime: AppRuntime,
        cache: TranscriptCache | None = None,
        max_runs: int = 256,
        conversations: ConversationStore | None = None,
    ) -> None:
        self.runtime = runtime
        self.app = runtime.app
        self.conversations = conversations or ConversationStore(runtime.artifacts)
        """Where a conversation's turns are read for the recall of a turn's model calls."""
        self.slots: RunSlots = runtime.slots
        """The worker's run slots (its runtime's): a model call takes its run's."""
        self.cache = cache or TranscriptCache()
        self._mcp_tools: OrderedDict[str, list[McpToolInfo]] = OrderedDict()
        self._max_runs = max_runs

    async def _listed_mcp_tools(self, agent: Agent, run_id: str) -> list[McpToolInfo]:
        """The MCP tools the run listed at its start, from the run itself the first time on this worker."""
        if not agent.mcp_servers:
            return []
        tools = self._mcp_tools.get(run_id)
        if tools is None:
            handle = activity.client().get_workflow_handle(run_id)
            tools = await handle.query(QUERY_MCP_TOOLS, result_type=list[McpToolInfo])
            self._mcp_tools[run_id] = tools
            while len(self._mcp_tools) > self._max_runs:
                self._mcp_tools.popitem(last=False)
        self._mcp_tools.move_to_end(run_id)
        return tools

    async def _transcript(self, request: ModelRequest) -> list[Message]:
        prefix = self.cache.prefix(request.run_id, request.base_count, request.base_digest)
        if prefix is None and request.base_count == 0:
            prefix = []
        if prefix is None:
            handle = activity.client().get_workflow_handle(request.run_id)
            prefix = await handle.query(
                QUERY_TRANSCRIPT, TranscriptQuery(upto=request.base_count), result_type=list[Message]
            )
            if chain_digest(EMPTY_DIGEST, prefix) != request.base_digest:
                # retried: a query answered by a worker that has not caught up with the history yet
                raise RuntimeError(f"transcript of run {request.run_id!r} does not match its digest")
        prefix.extend(request.delta)
        self.cache.store(request.run_id, prefix, chain_digest(request.base_digest, request.delta))
        return prefix

    async def _files(self, messages: list[Message]) -> dict[str, bytes]:
        """The bytes of the artifacts the messages' parts reference, read for this call, never kept.

        Raises:
            ArtifactNotFoundError: one is not in the store (the run fails, as for an attachment).
        """
        ids = list(dict.fromkeys(p.artifact.id for m in messages for p in m.media if p.artifact is not None))
        read = await asyncio.gather(*(self.runtime.artifacts.read(i) for i in ids))
        return dict(zip(ids, read, strict=True))

    def _deltas(self, request: ModelRequest) -> OnDelta:
        """Hands each delta to this process's listeners while the model writes.

        The deltas are never stored: a retried call streams again from the start.
        """
        events = self.runtime.events

        def on_delta(kind: DeltaKind, text: str) -> None:
            if events.wants(RUN_DELTA, request.run_id):
                events.emit(
                    RunEvent(
                        RUN_DELTA, request.run_id, None, {"step": request.step, "kind": kind, "text": text}
                    )
                )

        return on_delta

    @activity.defn(name=ACTIVITY_CALL_MODEL)
    async def call_model(self, request: ModelRequest) -> ModelResponse:
        """One model call of a run's step, with the transcript rebuilt from the run, not sent in.

        The request carries the step's new messages only (history grows linearly); the tools offered
        are the run's (its factory's, its MCP servers' listing) as its policy allows them. The call
        runs in the run's slot of this worker (``chamvi._run_slots``).
        """
        # heartbeating while it waits for a slot too, so a cancelled run stops waiting
        async with heartbeating(), self.slots.slot(request.run_id):
            return await self._call_model(request)

    async def _call_model(self, request: ModelRequest) -> ModelResponse:
        agent = await self.runtime.agent(request.agent, request.revision)
        ref, model = self.app.model_for(agent)
        transcript = await self._transcript(request)
        policy_run = PolicyRun(request.run_id, agent.name, request.trigger)
        mcp_tools = await self._listed_mcp_tools(agent, request.run_id)
        stored_system = next((i for i, m in enumerate(transcript) if m.role == "system"), None)
        if stored_system is not None:
            raise InvalidRunStateError(
                f"run {request.run_id!r}: message {stored_system} of its transcript has the system role: a "
                "run's transcript holds user, assistant and tool messages (system ones are the agent's "
                "instructions)"
            )
        instructions = await self.runtime.instructions_for(agent, request.skills_version)
        # a turn's recalled conversation follows the configured instructions, before its own transcript
        recalled = (
            await recalled_messages(
                self.conversations, agent.name, request.conversation, tool_calls=agent.conversation.tool_calls
            )
            if request.conversation is not None
            else []
        )
        messages = [*instructions, *recalled, *transcript]
        chat = ChatRequest(
            run_id=request.run_id,
            agent=agent.name,
            step=request.step,
            messages=messages,
            transcript_start=len(instructions) + len(recalled),
            tools=[
                *(
                    ToolSchema(t.name, t.description, t.json_schema())
                    for t in self.runtime.tools_for(agent, policy_run).values()
                    if agent.allows(t.name, policy_run)
                ),
                *(
                    ToolSchema(t.name, t.description, t.input_schema)
                    for t in mcp_tools
                    if agent.allows(t.name, policy_run)
                ),
            ],
            output_schema=agent.output.model_json_schema() if agent.output is not None else None,
            on_delta=self._deltas(request),
            # read for each call, never kept: history and checkpoints hold the references only
            attachments=[
                AttachedFile(a, await self.runtime.artifacts.read(a.id)) for a in request.trigger.attachments
            ],
            files=await self._files(messages),
        )
        settings = _step_settings(agent, chat.tools, transcript, request.model_settings, (ref, model))
        chat = replace(chat, settings=settings)
        response = await model.complete(chat)  # heartbeating: a cancelled run stops a stalled stream
        if settings is not None:
            response = response.model_copy(update={"model_settings": settings})
        if (
            agent.output is not None
            and not response.message.tool_calls
            and response.finish_reason not in ("length", "error", "incomplete")
        ):
            try:
                parsed = agent.output.model_validate_json(response.message.content or "")
            except PydanticValidationError as error:
                issues = list(validation_issues(error.errors(include_input=False)))
                return response.model_copy(update={"output_error": str(error), "output_issues": issues})
            return response.model_copy(update={"output": parsed.model_dump(mode="json")})
        return response

    @activity.defn(name=ACTIVITY_EXTRACT)
    async def extract(self, request: ExtractInput) -> ExtractResult:
        """One ``extract()`` of a tool call: a model call with structured output and no tools.

        A model call of the run: it takes the run's slot of this worker, as ``call_model`` does.
        """
        async with heartbeating(), self.slots.slot(request.run_id):
            return await self._extract(request)

    async def _extract(self, request: ExtractInput) -> ExtractResult:
        agent = await self.runtime.agent(request.agent, request.revision)
        handle = activity.client().get_workflow_handle(request.run_id)
        asked = await handle.query(
            QUERY_EXTRACTION, EffectQuery(key=request.key), result_type=ExtractionRequest
        )
        model = self.app.models.resolve(asked.model) if asked.model else self.app.model_for(agent)[1]
        settings = _extraction_settings(agent, asked, model)
        instructions = EXTRACTION_INSTRUCTIONS + (f"\n\n{asked.instructions}" if asked.instructions else "")
        response = await model.complete(
            ChatRequest(
                run_id=request.run_id,
                agent=agent.name,
                step=request.step,
                messages=[
                    Message(role="system", content=instructions),
                    Message(role="user", content=asked.content),
                ],
                output_schema=asked.output_schema,
                settings=settings,
            )
        )
        if response.finish_reason == "length":
            raise IncompleteResponseError("the extraction was cut off at the model's output token limit")
        if response.finish_reason in ("error", "incomplete"):
            # retried: nothing of a broken stream has reached the tool, so another attempt is safe
            problem = response.error.message if response.error else "the stream closed without a finish"
            raise ProviderUnavailableError(f"the extraction's stream broke: {problem}")
        try:
            output = json.loads(response.message.content or "")
        except json.JSONDecodeError as error:
            # retried: another answer of the model may be JSON; the tool checks it against its schema
            raise RuntimeError(f"the extraction is not JSON: {error}") from None
        return ExtractResult(output=output, usage=response.usage)


def _step_settings(
    agent: Agent,
    tools: list[ToolSchema],
    transcript: list[Message],
    run_settings: ModelSettings | None,
    model: tuple[str, ChatModel],
) -> ModelSettings | None:
    """The settings this step sends: the run's over the agent's, as ``ModelSettings.for_call`` has them.

    Raises:
        ModelError: ``tool_choice`` names a tool this run is not offered, or requires a tool when
            none is, or the run's own settings set what the agent's ``dispatch_settings`` do not
            allow or ask what the model's provider does not support (not retried: the next attempt
            would ask the same).
    """
    base = agent.model_settings
    settings = base.merged(run_settings) if base is not None else run_settings
    if settings is None:
        return None
    offered = {t.name for t in tools}
    problems = settings.problems(offered) if tools or settings.named_tool else []
    if run_settings is not None:
        # the dispatch's check asked a worker; a run started while none answered is checked here
        problems.extend(i.message for i in agent.dispatch_settings.issues(agent.name, run_settings))
        refused = refused_settings(model[1], settings)
        if refused:
            problems.append(f"model {model[0]!r} does not support them: {'; '.join(refused)}")
    if problems:
        whose = "the run's" if run_settings is not None else "its"
        raise ModelError(f"agent {agent.name!r}: {whose} model_settings: {'; '.join(problems)} in this run")
    settings = settings.for_call(
        offers_tools=bool(tools), after_tool_result=any(m.role == "tool" for m in transcript)
    )
    return None if settings.empty else settings


def _extraction_settings(agent: Agent, asked: ExtractionRequest, model: ChatModel) -> ModelSettings | None:
    """The call's own settings, over the agent's when it extracts with the agent's model; no tool settings.

    Raises:
        ModelError: the extraction's model does not support them (not retried).
    """
    own = asked.model_settings
    base = agent.model_settings if asked.model is None else None
    settings = base.merged(own) if base is not None else own
    if settings is None:
        return None
    refused = refused_settings(model, settings)
    if refused:
        raise ModelError(f"extract(): the model does not support its model_settings: {'; '.join(refused)}")
    settings = settings.for_call(offers_tools=False, after_tool_result=False)
    return None if settings.empty else settings
