"""Tools an agent can call: ``@tool``, ``@effect_tool``, and the run context they read.

A tool is a plain Python function. Its input schema comes from its type hints (or from a single
pydantic-model parameter) and its description from its docstring. A parameter annotated
``ToolContext`` receives the run's context instead of a model-supplied argument.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import hashlib
import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, create_model
from pydantic_core import to_jsonable_python
from temporalio.common import RetryPolicy

from chamvi._constants import DEFAULT_APPROVAL_TIMEOUT
from chamvi._run_context import Approvals, EffectLedger, LinkedRuns, RunContext, request_approval
from chamvi.channels import ChannelAccess
from chamvi.context import Provided
from chamvi.errors import InvalidAgentDefinitionError, InvalidInputError
from chamvi.models import ApprovalDecision, RunView

if TYPE_CHECKING:
    from chamvi.artifacts import RunArtifacts
    from chamvi.state.access import AgentStateAccess

TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Predicate = bool | Callable[[Any, "ToolContext"], bool | Awaitable[bool]]


def require_state(access: AgentStateAccess | None) -> AgentStateAccess:
    """``ctx.state``, for a tool call's context and a tool factory's alike.

    Raises:
        InvalidInputError: no worker's state store serves the context (one built by hand).
    """
    if access is None:
        raise InvalidInputError(
            "this context has no agent state: state is read in runs served by a worker "
            "(ChamviPlugin opens the store)"
        )
    return access


@dataclass
class ToolContext:
    """Handed to a tool that asks for it: ``ctx.run``, ``ctx.state``, ``ctx.channels``, what the app provides.

    Built by the tool runner for one tool call (``chamvi._tool_runner``).
    """

    run: RunContext
    channels: ChannelAccess
    effects: EffectLedger
    approvals: Approvals = field(default_factory=Approvals)
    provided: Provided = field(default_factory=Provided)
    tool_context: Any = None
    """The configuration the agent handed this tool (``tools_context``), validated by its schema."""
    runs: LinkedRuns | None = None
    run_artifacts: RunArtifacts | None = None
    """What ``artifacts`` answers; the tool runner gives every call of a run one."""
    state_access: AgentStateAccess | None = None
    """The agent's state; read it as :attr:`state`."""
    _taint: str | None = field(default=None, init=False)
    effect_key: str | None = field(default=None, init=False)
    """The effect key of this call of an effect tool, to pass on as a remote API's idempotency key."""

    @property
    def state(self) -> AgentStateAccess:
        """The agent's state, shared by its runs: ``get``/``set`` and ``collection(name)``.

        Raises:
            InvalidInputError: the context belongs to no worker's state store (a ToolContext built by hand).
        """
        return require_state(self.state_access)

    @property
    def taint(self) -> str | None:
        """Where untrusted content came from in this call (``tool:x``), if anywhere."""
        return self._taint

    @property
    def artifacts(self) -> RunArtifacts:
        """The run's files: ``put(media_type, data, filename=None)``, ``get(id)``, ``list()``.

        Raises:
            InvalidInputError: outside a tool call of a run.
        """
        if self.run_artifacts is None:
            raise InvalidInputError("ctx.artifacts is only available inside a tool call of a run")
        return self.run_artifacts

    async def dispatch(
        self,
        agent: str,
        payload: Any = None,
        *,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
        channel: str | None = None,
        address: str | None = None,
    ) -> str:
        """Starts a run of ``agent`` from this tool call and answers its id.

        The run is a run of its own (listed, approved and cancelled like any), linked to this one: it
        has this run's invoker and, when this run is tainted, starts tainted. ``idempotency_key`` (scoped
        to this run) and ``concurrency_key`` work as for any dispatch; the id is recorded, so a call that
        runs again starts nothing twice.

        Raises:
            InvalidInputError: outside a tool call of a run.
        """
        return await self._linked().dispatch(
            agent,
            payload,
            idempotency_key=idempotency_key,
            concurrency_key=concurrency_key,
            channel=channel,
            address=address,
        )

    async def wait_for(self, run_id: str) -> RunView:
        """The outcome of ``run_id`` (a run this call started), once it ended however it ended.

        The first time, the tool call stops here while this run waits for the other one, durably;
        then the call runs again from the start and this returns the outcome (code before it must be
        idempotent, as before ``approve()``). A tainted run taints this one before its outcome
        reaches this run's model.

        Raises:
            InvalidInputError: outside a tool call of a run.
        """
        return await self._linked().wait_for(run_id)

    def _linked(self) -> LinkedRuns:
        if self.runs is None:
            raise InvalidInputError("this ToolContext belongs to no run: it cannot start or wait for runs")
        return self.runs

    def mark_tainted(self, source: str) -> None:
        """Marks the run untrusted before this call's result reaches the model (e.g. ``tool:x``)."""
        if self._taint is None:
            self._taint = source


async def approve(
    ctx: ToolContext,
    *,
    title: str,
    body: str | None = None,
    timeout: timedelta = DEFAULT_APPROVAL_TIMEOUT,
) -> ApprovalDecision:
    """Asks a person to approve what the tool is about to do.

    The first time, the run goes to ``waiting`` and the tool call stops here. Once answered (or
    timed out, which denies), the tool call runs again from the start and this returns the
    decision, so code before it must be idempotent.

    Raises:
        InvalidInputError: ``ctx`` is not a tool call's context, or the timeout is out of range.
    """
    if not isinstance(ctx, ToolContext):
        raise InvalidInputError("approve() needs the ToolContext of the tool call it runs in")
    return request_approval(ctx.approvals, title=title, body=body, timeout=timeout)


def effect_marker(key: str) -> str:
    """A hidden HTML comment to embed in what an effect creates, so ``already_applied`` can find it."""
    return f"<!-- chamvi:effect:{key} -->"


EffectKeyFn = Callable[[Any, ToolContext], str]
AlreadyAppliedFn = Callable[..., Awaitable[Any] | Any]
"""``already_applied(key, input, ctx)``; the two-argument form ``(key, input)`` is accepted too."""


@dataclass(frozen=True)
class EffectSpec:
    """How an :func:`effect_tool` finds its effect key and asks whether the effect happened already."""

    effect_key: EffectKeyFn | None = None
    already_applied: AlreadyAppliedFn | None = None

    async def ask_applied(self, key: str, arguments: Any, ctx: ToolContext) -> Any:
        """``already_applied``'s answer (None: not applied), with the tool's context when it takes one."""
        applied = self.already_applied
        if applied is None:
            return None
        answer = applied(key, arguments, ctx) if self._applied_wants_context else applied(key, arguments)
        return await answer if inspect.isawaitable(answer) else answer

    @functools.cached_property
    def _applied_wants_context(self) -> bool:
        """Read once: the three-argument form takes the call's context."""
        applied = self.already_applied
        return applied is not None and len(inspect.signature(applied).parameters) >= 3


@dataclass(frozen=True)
class Trust:
    """``taint``: a result marks the run untrusted; ``guard_when_tainted``: needs approval once tainted."""

    taint: Predicate = False
    guard_when_tainted: Predicate = False


@dataclass(frozen=True)
class Tool:
    """A tool as :func:`tool` or :func:`effect_tool` built it: what the model sees and the worker runs."""

    name: str
    description: str
    fn: Callable[..., Any]
    input_model: type[BaseModel]
    context_param: str | None
    model_param: str | None
    effect: EffectSpec | None = None
    trust: Trust = Trust()
    retry: RetryPolicy | None = None
    context_schema: type[BaseModel] | None = None
    """The configuration an agent hands this tool (``define_agent(tools_context=...)``), if it takes one."""

    @property
    def is_chamvi_tool(self) -> bool:
        """Whether chamvi itself defines this tool (``knowledge_search``, the wiki's tools)."""
        return self.fn.__module__.split(".")[0] == "chamvi"

    @functools.cached_property
    def _schema(self) -> dict[str, Any]:
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    def json_schema(self) -> dict[str, Any]:
        """The input's JSON schema; built once per tool (it costs more than the rest of a model call)."""
        return copy.deepcopy(self._schema)

    def parse_input(self, arguments: dict[str, Any]) -> BaseModel:
        """The model's arguments checked against the tool's input model.

        Raises:
            pydantic.ValidationError: the arguments do not fit; the tool runner hands the model the error.
        """
        return self.input_model.model_validate(arguments)

    def default_effect_key(self, run_id: str, arguments: BaseModel) -> str:
        """The key an effect is recorded under without an ``effect_key``: the run, the tool, the input."""
        canonical = json.dumps(arguments.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return f"{run_id}:{self.name}:{hashlib.sha256(canonical.encode()).hexdigest()}"

    async def invoke(self, arguments: BaseModel, ctx: ToolContext) -> Any:
        """Calls the function and returns its result as JSON-able data.

        The function gets the input's fields (or the whole model) and the context; a plain function runs
        in a thread so it never blocks the worker's event loop.
        """
        kwargs: dict[str, Any]
        if self.model_param is not None:
            kwargs = {self.model_param: arguments}
        else:
            kwargs = {name: getattr(arguments, name) for name in type(arguments).model_fields}
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            result = await self.fn(**kwargs)
        else:
            result = await asyncio.to_thread(self.fn, **kwargs)
        return to_jsonable_python(result)


def _build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    description: str | None,
    effect: EffectSpec | None,
    trust: Trust,
    retry: RetryPolicy | None = None,
    context_schema: type[BaseModel] | None = None,
) -> Tool:
    tool_name = name or fn.__name__
    if not TOOL_NAME_PATTERN.match(tool_name):
        raise InvalidAgentDefinitionError(
            f"tool name {tool_name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
        )
    try:
        hints = get_type_hints(fn)
    except NameError as error:
        raise InvalidAgentDefinitionError(
            f"tool {tool_name!r}: cannot resolve a type hint: {error}"
        ) from None
    context_param: str | None = None
    model_param: str | None = None
    fields: dict[str, Any] = {}
    params = list(inspect.signature(fn).parameters.values())
    for param in params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidAgentDefinitionError(f"tool {tool_name!r}: *args and **kwargs are not supported")
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, default)
    model_fields = [n for n, (a, _) in fields.items() if isinstance(a, type) and issubclass(a, BaseModel)]
    if len(fields) == 1 and model_fields:
        model_param = model_fields[0]
        input_model: type[BaseModel] = fields[model_param][0]
    else:
        input_model = create_model(f"{tool_name}_input", __config__=ConfigDict(extra="forbid"), **fields)
    doc = description if description is not None else inspect.getdoc(fn)
    if not doc:
        raise InvalidAgentDefinitionError(
            f"tool {tool_name!r} has no description: give it a docstring or description="
        )
    return Tool(
        name=tool_name,
        description=doc,
        fn=fn,
        input_model=input_model,
        context_param=context_param,
        model_param=model_param,
        effect=effect,
        trust=trust,
        retry=retry,
        context_schema=context_schema,
    )


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    trust: Trust = Trust(),
    retry: RetryPolicy | None = None,
    context_schema: type[BaseModel] | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    trust: Trust = Trust(),
    retry: RetryPolicy | None = None,
    context_schema: type[BaseModel] | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Makes a function a tool; use bare (``@tool``) or with options (``@tool(name=...)``).

    Args:
        fn: the function, when used bare.
        name: the tool's name for the model (default: the function's name).
        description: what the model reads (default: the docstring).
        trust: whether its results taint the run, and whether it is guarded once tainted.
        retry: how its activity is retried when it fails (a timeout, a worker that died); the app's
            tool policy by default. A tool that raises is a tool error, not retried.
        context_schema: the configuration an agent may hand the tool (``define_agent(tools_context=
            {name: value})``, checked against this model); the tool reads it as ``ctx.tool_context``.
    """
    if fn is not None:
        return _build_tool(fn, name=None, description=None, effect=None, trust=trust)
    return lambda f: _build_tool(
        f,
        name=name,
        description=description,
        effect=None,
        trust=trust,
        retry=retry,
        context_schema=context_schema,
    )


@overload
def effect_tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def effect_tool(
    *,
    name: str | None = None,
    description: str | None = None,
    effect_key: EffectKeyFn | None = None,
    already_applied: AlreadyAppliedFn | None = None,
    trust: Trust = Trust(),
    retry: RetryPolicy | None = None,
) -> Callable[[Callable[..., Any]], Tool]: ...
def effect_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    effect_key: EffectKeyFn | None = None,
    already_applied: AlreadyAppliedFn | None = None,
    trust: Trust = Trust(),
    retry: RetryPolicy | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """A tool with a side effect, applied once per effect key.

    Each call tries the recorded result first, then ``already_applied(key, input, ctx)`` (a non-None
    answer is taken as the result), then the function. The result is recorded after the function
    returns; a function that raises records nothing. The key defaults to
    ``<run_id>:<tool>:<sha256 of input>``; ``effect_key(input, ctx)`` replaces it, and the tool reads it
    as ``ctx.effect_key`` (to hand a remote API as its idempotency key).

    Exactly once means: a call whose result was recorded never runs again. A worker that dies after
    the side effect and before the result is recorded leaves nothing recorded, so the call runs again:
    ``already_applied`` is how it finds out, in the system it changed, that the effect happened.
    """
    spec = EffectSpec(effect_key=effect_key, already_applied=already_applied)
    if fn is not None:
        return _build_tool(fn, name=None, description=None, effect=spec, trust=trust)
    return lambda f: _build_tool(f, name=name, description=description, effect=spec, trust=trust, retry=retry)
