"""``/conversations``: talk with an agent across turns, read, list, follow and forget conversations.

The token's principal is recorded as each message's invoker (the turn's run's invoker too). A
conversation id travels as one path segment: over HTTP it holds no ``/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Collection
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Response
from fastapi.responses import StreamingResponse
from temporalio.service import RPCError, RPCStatusCode

from chamvi._constants import CONVERSATION_ID_MAX_LENGTH, CONVERSATION_QUEUE_MAX
from chamvi.client import ChamviClient
from chamvi.conversations.client import check_conversation_id
from chamvi.conversations.events import CONVERSATION_MESSAGE, TurnStarted, conversation_turns, parse_stream_id
from chamvi.conversations.store import ConversationStore
from chamvi.errors import NotFoundError, PermissionDeniedError, RunNotFoundError, UnavailableError
from chamvi.http.agents_routes import AgentCheck, AgentDirectory, agent_check
from chamvi.http.auth import QUERY_TOKEN_KEY, Token, permission, principal
from chamvi.http.errors import error_responses
from chamvi.http.params import AgentName
from chamvi.http.runs_routes import (
    KEEPALIVE_SECONDS,
    SSE_HEADERS,
    SSE_MEDIA_TYPE,
    follow_events,
)
from chamvi.http.schemas import (
    ChatAgents,
    ConversationDeleted,
    ConversationList,
    ErrorBody,
    MessageOut,
    SendMessage,
)
from chamvi.models.conversations import ConversationPage, TurnRecord, conversation_workflow_id
from chamvi.permissions import has_agent_permission
from chamvi.run_events import EventHub

ConversationId = Annotated[
    str,
    Path(
        min_length=1,
        max_length=CONVERSATION_ID_MAX_LENGTH,
        description="The conversation's id: no control characters, not dots only, at most 255 bytes "
        "percent-encoded as UTF-8 (200 ASCII characters fit; 422 over it)",
    ),
]
Principal = Annotated[Token, Depends(principal)]
READ = "conversations:read"
WRITE = "conversations:write"


def check_scope(token: Token, required: str, agent: str) -> None:
    """Refuses a token whose ``required`` permission is narrowed to other agents than ``agent``.

    Checked before the agent is looked up, so a narrowed token learns nothing of other agents.

    Raises:
        PermissionDeniedError: naming the token, the agent and both permissions that would do.
    """
    if not has_agent_permission(token.permissions, required, agent):
        raise PermissionDeniedError(
            f"token {token.id!r} lacks the permission {f'{required}:{agent}'!r} (or {required!r}) "
            f"the conversations of agent {agent!r} need"
        )


STREAM_ID_PATTERN = r"^([0-9]+\.[0-9]+)?$"
"""The ``id`` of a conversation stream's event, ``<turn>.<event>``; empty is none."""


def conversations_router(
    runs: ChamviClient,
    agents: Collection[str] | None = None,
    hub: EventHub | None = None,
    *,
    check_agent: AgentCheck | None = None,
    directory: AgentDirectory | None = None,
) -> APIRouter:
    """The ``/conversations`` routes, through ``runs``.

    Args:
        runs: the client that talks to Temporal; its artifact store holds the transcripts.
        agents: the agents in code the workers serve, listed for the chat view.
        hub: this process's events: with a worker in the same process the stream carries the model's
            deltas too.
        check_agent: refuses an agent the workers do not serve, at once (404): by default one outside
            ``agents`` (``chamvi.http.agents_routes.agent_check``); an agent defined at runtime passes
            when ``directory`` knows it.
        directory: the agents defined at runtime, listed for the chat view beside ``agents``.
    """
    router = APIRouter(prefix="/conversations", tags=["conversations"])
    check_agent = check_agent or agent_check(agents, directory)

    @router.post(
        "/{agent}/{conversation_id}/messages",
        status_code=202,
        response_model=MessageOut,
        responses={
            200: {"model": MessageOut, "description": "A resent message id: the turn it started before"},
            **error_responses(400, 401, 403, 404, 413, 422),
            503: {
                "model": ErrorBody,
                "description": (
                    f"The conversation has {CONVERSATION_QUEUE_MAX:,} messages waiting already, or "
                    "Temporal did not take the message: send it again, same `message_id`, after "
                    "`Retry-After`"
                ),
                "headers": {
                    "Retry-After": {"description": "Seconds to wait", "schema": {"type": "integer"}}
                },
            },
        },
        openapi_extra=permission(WRITE, narrowed=True),
        summary="Send a message",
    )
    async def send_message(
        agent: AgentName,
        conversation_id: ConversationId,
        body: Annotated[SendMessage, Body()],
        token: Principal,
        response: Response,
    ) -> MessageOut:
        """Queues a message for its turn: 202 with the turn's run id.

        A new conversation starts with its first message. The turn runs once the turns before it have
        ended; follow it at `/runs/{run_id}/events` or the conversation's `/events`. A message id sent
        before answers 200 with the turn it started then, and starts nothing. Up to 1,000 messages
        wait their turn, however many arrive at once; one more answers 503 with `Retry-After`. Needs
        `conversations:write` or `conversations:write:<agent>`.
        """
        check_scope(token, WRITE, agent)
        await check_agent(agent)
        sent = await runs.conversations.send(
            agent,
            body.text,
            conversation=check_conversation_id(conversation_id),
            message_id=body.message_id,
            invoker=token.invoker(),
        )
        if not sent.created:
            response.status_code = 200
        return MessageOut(
            conversation=sent.conversation, run_id=sent.run_id, turn=sent.turn, created=sent.created
        )

    @router.get(
        "",
        response_model=ChatAgents,
        responses=error_responses(401, 403),
        openapi_extra=permission(READ, narrowed=True),
        summary="List the agents to talk with",
    )
    async def chat_agents(token: Principal) -> ChatAgents:
        """The agents the workers serve, in code and defined at runtime, by name.

        Empty when the API knows neither. A token holding `conversations:read:<agent>` (not
        `conversations:read`) gets those agents only.
        """
        names = set(agents or ())
        if directory is not None:
            with contextlib.suppress(UnavailableError):  # no worker to ask: the agents in code still
                names.update(info.name for info in await directory.list_agents())
        return ChatAgents(agents=sorted(n for n in names if has_agent_permission(token.permissions, READ, n)))

    @router.get(
        "/{agent}",
        response_model=ConversationList,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission(READ, narrowed=True),
        summary="List conversations",
    )
    async def list_conversations(
        agent: AgentName, token: Principal, limit: Annotated[int, Query(ge=1, le=100)] = 20
    ) -> ConversationList:
        """The agent's conversations, the latest started first, from Temporal's visibility.

        Needs `conversations:read` or `conversations:read:<agent>`.
        """
        check_scope(token, READ, agent)
        await check_agent(agent)
        return ConversationList(data=await runs.conversations.list(agent, limit=limit))

    @router.get(
        "/{agent}/{conversation_id}",
        response_model=ConversationPage,
        responses=error_responses(400, 401, 403, 404, 422),
        openapi_extra=permission(READ, narrowed=True),
        summary="Read a conversation",
    )
    async def read_conversation(
        agent: AgentName,
        conversation_id: ConversationId,
        token: Principal,
        limit: Annotated[int, Query(ge=1, le=100, description="Turns per page")] = 20,
        before: Annotated[
            int | None, Query(ge=0, le=10**9, description="The `before` of the page after this one")
        ] = None,
    ) -> ConversationPage:
        """The messages of the latest `limit` turns (before turn `before`), oldest first.

        Without `before`, the messages waiting for their turn follow. Needs `conversations:read` or
        `conversations:read:<agent>`.
        """
        check_scope(token, READ, agent)
        await check_agent(agent)
        return await runs.conversations.messages(
            agent, check_conversation_id(conversation_id), limit=limit, before=before
        )

    @router.get(
        "/{agent}/{conversation_id}/events",
        response_class=StreamingResponse,
        responses={
            200: {"content": {SSE_MEDIA_TYPE: {}}, "description": "The conversation's events, turn by turn"},
            **error_responses(401, 403, 404, 422),
        },
        openapi_extra={**permission(READ, narrowed=True), QUERY_TOKEN_KEY: True},
        summary="Follow a conversation",
    )
    async def conversation_events(
        agent: AgentName,
        conversation_id: ConversationId,
        token: Principal,
        # a header is text or absent: empty is none, so the document offers no null to send
        last_event_id: Annotated[
            str, Header(alias="Last-Event-ID", max_length=40, pattern=STREAM_ID_PATTERN)
        ] = "",
        resume_after: Annotated[
            str | None,
            Query(
                alias="last_event_id",
                max_length=40,
                pattern=STREAM_ID_PATTERN,
                description="As `Last-Event-ID`; the header wins",
            ),
        ] = None,
    ) -> Response:
        """Each turn, from the one under way (or the next), as Server-Sent Events.

        A turn is a `conversation.message` event with the person's message, then the turn's run
        events (`run.delta` while the model writes, `run.step`, `run.waiting`, ..., `run.completed`),
        each with its `turn`. Ids are `<turn>.<event>`: reconnect with `Last-Event-ID` (or
        `?last_event_id=`) to resume after one, without gaps or repeats. The stream goes on while the
        conversation lives. Needs `conversations:read` or `conversations:read:<agent>`.
        """
        check_scope(token, READ, agent)
        await check_agent(agent)
        check_conversation_id(conversation_id)
        resume = parse_stream_id(last_event_id or resume_after)
        handle = runs.client.get_workflow_handle(conversation_workflow_id(agent, conversation_id))
        try:
            description = await handle.describe()
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                raise NotFoundError(f"no conversation {conversation_id!r} with agent {agent!r}") from None
            raise
        return StreamingResponse(
            _stream(runs, hub, agent, conversation_id, resume, description.run_id),
            media_type=SSE_MEDIA_TYPE,
            headers=SSE_HEADERS,
        )

    @router.delete(
        "/{agent}/{conversation_id}",
        response_model=ConversationDeleted,
        responses=error_responses(401, 403, 404, 422),
        openapi_extra=permission(WRITE, narrowed=True),
        summary="Forget a conversation",
    )
    async def delete_conversation(
        agent: AgentName, conversation_id: ConversationId, token: Principal
    ) -> ConversationDeleted:
        """Ends the conversation and forgets it.

        The conversation's workflow ends (with a turn under way), its transcript is deleted, and so are
        the Temporal executions of the conversation and of its turns. Executions visibility did not
        list yet stay until the namespace's retention removes them; archives and log collectors keep
        what they copied. Needs `conversations:write` or `conversations:write:<agent>`.
        """
        check_scope(token, WRITE, agent)
        await check_agent(agent)
        executions = await runs.conversations.delete(agent, check_conversation_id(conversation_id))
        return ConversationDeleted(agent=agent, id=conversation_id, executions=executions)

    return router


def _sse(event_type: str, turn: int, event_id: int | None, data: dict[str, Any]) -> str:
    body = json.dumps({**data, "type": event_type, "turn": turn}, default=str, separators=(",", ":"))
    head = f"id: {turn}.{event_id}\n" if event_id is not None else ""
    return f"{head}event: {event_type}\ndata: {body}\n\n"


def _message_event(turn: int, run_id: str, message: dict[str, Any]) -> str:
    return _sse(CONVERSATION_MESSAGE, turn, 0, {"run_id": run_id, **message})


async def _turn(
    runs: ChamviClient,
    hub: EventHub | None,
    turn: int,
    run_id: str,
    message: dict[str, Any],
    after: int | None,
) -> AsyncIterator[str]:
    if after is None:
        yield _message_event(turn, run_id, message)
    try:
        # an ended run's history is whole: read it without this process's deltas of it
        events = (
            follow_events(runs, hub, run_id, after)
            if await runs.is_open(run_id)
            else runs.events(run_id, after)
        )
        async for event in events:
            if event is None:
                yield ": keep-alive\n\n"
                continue
            yield _sse(event.type, turn, event.event_id, {**event.data, "run_id": event.run_id})
    except RunNotFoundError:
        return  # Temporal's retention removed the run: its message is all there is


def _record_message(record: TurnRecord) -> dict[str, Any]:
    return {
        "message_id": record.message_id,
        "text": record.text,
        "invoker": record.invoker.model_dump(mode="json") if record.invoker else None,
    }


def _started_message(started: TurnStarted) -> dict[str, Any]:
    run_input = started.input
    return {
        "message_id": run_input.conversation.message_id if run_input.conversation else None,
        "text": run_input.payload,
        "invoker": run_input.invoker.model_dump(mode="json") if run_input.invoker else None,
    }


async def _stream(
    runs: ChamviClient,
    hub: EventHub | None,
    agent: str,
    conversation: str,
    resume: tuple[int, int] | None,
    run_id: str,
) -> AsyncIterator[str]:
    """The conversation's turns one after the other, each its message and its run's events."""
    recorded = await _recorded_turns(runs, agent, conversation)
    start, after = resume if resume is not None else (recorded, None)
    if resume is not None and start < recorded and runs.artifacts is not None:
        # the resumed turns that are recorded: their runs have ended, their events are all there
        store = ConversationStore(runs.artifacts)
        for turn in range(start, recorded):
            record = await store.turn(agent, conversation, turn)
            async for line in _turn(
                runs, hub, turn, record.run_id, _record_message(record), after if turn == start else None
            ):
                yield line
            after = None
        start = recorded
    turns = conversation_turns(runs.client, conversation_workflow_id(agent, conversation), run_id)
    try:
        while True:
            upcoming = asyncio.ensure_future(anext(turns))
            while not upcoming.done():
                await asyncio.wait([upcoming], timeout=KEEPALIVE_SECONDS)
                if not upcoming.done():
                    yield ": keep-alive\n\n"
            try:
                started = upcoming.result()
            except StopAsyncIteration:
                return  # the conversation ended: it was deleted
            if started.turn < start:
                continue
            resumed = after if resume is not None and started.turn == resume[0] else None
            async for line in _turn(
                runs, hub, started.turn, started.run_id, _started_message(started), resumed
            ):
                yield line
    finally:
        with contextlib.suppress(BaseException):
            await turns.aclose()


async def _recorded_turns(runs: ChamviClient, agent: str, conversation: str) -> int:
    if runs.artifacts is not None:
        head = await ConversationStore(runs.artifacts).head(agent, conversation)
        if head is not None:
            return head.turns
    with contextlib.suppress(Exception):
        return (await runs.conversations.get(agent, conversation)).turns
    return 0
