"""Model settings: how a model is asked to answer (temperature, output tokens, tool choice, ...).

A plain pydantic model, so settings travel as data (a run's model step records them, an agent
given as data carries them) and read back as they were. Types are checked on construction; the
ranges, and what a provider supports, are checked where the settings are used: by ``define_agent``
(``InvalidAgentDefinitionError``), by ``extract(model_settings=...)`` and by the App, which asks
each agent's provider (:meth:`ModelSettings.problems`, ``refused_settings`` of a chat model).

Each provider maps them to its API and says what it does with the rest (see the README's table):
``openai/...`` and OpenAI-compatible endpoints send every field; ``anthropic/...`` refuses
``seed``, a temperature above 1 and the efforts ``none`` and ``minimal`` at definition; the
``local/...`` demo model and scripted models ignore them.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator, model_validator

from chamvi.errors import ChamviValidationError, ModelError, ValidationIssue

ToolChoiceMode = Literal["auto", "required", "none"]
ReasoningEffort = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]

STOP_SEQUENCES_MAX = 16
"""The most stop sequences a setting may hold (OpenAI itself takes at most 4; the server says so)."""
REQUEST_OWNED_FIELDS = frozenset(
    {"model", "messages", "system", "tools", "stream", "stream_options", "response_format", "n"}
)
"""Body fields every call sets itself: ``extra_body`` adds provider extras and never replaces these
(a run's own settings could otherwise switch its model or drop its transcript; chamvi reads one
answer per call, so ``n`` would only multiply the cost)."""
SETTING_BODY_FIELDS: dict[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop",
    "stop_sequences": "stop",
    "seed": "seed",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "reasoning_effort": "reasoning_effort",
    "output_config": "reasoning_effort",
    "max_tokens": "max_output_tokens",
    "max_completion_tokens": "max_output_tokens",
    "max_output_tokens": "max_output_tokens",
    "service_tier": "service_tier",
}
"""Body fields the settings' own fields become, each with that field: ``extra_body`` may not set them,
or it would pass what the settings' checks (ranges, a dispatch's allow-list and caps) refuse."""
CHECKED_BODY_FIELDS = REQUEST_OWNED_FIELDS | SETTING_BODY_FIELDS.keys()
"""Every body field ``extra_body`` may never carry."""


def _unset(value: object) -> bool:
    return value is None


class NamedTool(BaseModel):
    """A tool choice naming one tool: the model must call it (``{"tool": "search"}`` as data)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: str = Field(json_schema_extra={"minLength": 1})


class ModelSettings(BaseModel):
    """How the model is asked to answer; every field left at None is the provider's default.

    Attributes:
        temperature: sampling temperature, 0 to 2 (Anthropic: 0 to 1).
        max_output_tokens: the most tokens the answer may have (Anthropic requires one: its
            provider's ``max_tokens`` default, 8192, applies when this is None).
        top_p: nucleus sampling, above 0 and at most 1.
        stop: sequences that end the answer where the model writes them.
        seed: asks for reproducible sampling (OpenAI and compatible servers; Anthropic has none).
        tool_choice: ``"auto"`` (the model decides), ``"required"`` (it must call a tool),
            ``"none"`` (it must not), or ``NamedTool(tool="search")`` (it must call that one).
            ``"required"`` and a named tool hold until the run's first tool result: later steps
            send ``"auto"``, so the model can then answer (as the OpenAI Agents SDK's
            ``reset_tool_choice``). A call that offers no tools (``extract()``) sends no tool
            settings.
        parallel_tool_calls: False asks for at most one tool call per step.
        reasoning_effort: how hard a reasoning model thinks (OpenAI's ``reasoning_effort``,
            Anthropic's ``output_config.effort``).
        service_tier: the provider's processing tier, as it names them (OpenAI's ``"flex"``,
            ``"priority"``, ...; Anthropic's ``"auto"``, ``"standard_only"``).
        extra_body: provider extras, merged into the request body as they are (e.g. vLLM's
            ``{"top_k": 20}``, Anthropic's ``{"thinking": {...}}``). They never set a field the
            call sends itself or one of the fields above (``CHECKED_BODY_FIELDS``): such a key is
            a problem of the settings, and refused by the provider if it reaches one.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    # fields left at None stay out of the stored form (each model step records the settings). The
    # ranges are checked by field_problems, where the settings are used, and only stated in the JSON
    # Schema (the API's document): a pydantic constraint would also refuse them when a stored
    # history is read back
    temperature: float | None = Field(
        default=None, exclude_if=_unset, json_schema_extra={"minimum": 0, "maximum": 2}
    )
    max_output_tokens: int | None = Field(default=None, exclude_if=_unset, json_schema_extra={"minimum": 1})
    top_p: float | None = Field(
        default=None, exclude_if=_unset, json_schema_extra={"exclusiveMinimum": 0, "maximum": 1}
    )
    stop: list[str] | None = Field(
        default=None,
        exclude_if=_unset,
        json_schema_extra={
            "minItems": 1,
            "maxItems": STOP_SEQUENCES_MAX,
            "items": {"type": "string", "minLength": 1},
        },
    )
    seed: int | None = Field(default=None, exclude_if=_unset)
    tool_choice: ToolChoiceMode | NamedTool | None = Field(default=None, exclude_if=_unset)
    parallel_tool_calls: bool | None = Field(default=None, exclude_if=_unset)
    reasoning_effort: ReasoningEffort | None = Field(default=None, exclude_if=_unset)
    service_tier: str | None = Field(default=None, exclude_if=_unset)
    extra_body: dict[str, Any] | None = Field(
        default=None,
        exclude_if=_unset,
        json_schema_extra={"propertyNames": {"not": {"enum": [*sorted(CHECKED_BODY_FIELDS)]}}},
    )

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("tool_choice", mode="before")
    @classmethod
    def _tool_choice(cls, value: Any) -> Any:
        if isinstance(value, str) and value not in ("auto", "required", "none"):
            raise ValueError(
                f"tool_choice {value!r} is none of 'auto', 'required', 'none': name a tool with "
                f"NamedTool(tool={value!r})"
            )
        return value

    @property
    def named_tool(self) -> str | None:
        """The tool ``tool_choice`` names, or None."""
        return self.tool_choice.tool if isinstance(self.tool_choice, NamedTool) else None

    def problems(self, tools: set[str] | None = None) -> list[str]:
        """What is wrong with these settings, one line per field; empty when nothing is.

        Args:
            tools: the tools the model is offered, when they are known (an agent's own tools);
                ``tool_choice`` naming another, or requiring a tool when there is none, is a problem.
        """
        return [message for _, message in self.field_problems(tools)]

    def field_problems(self, tools: set[str] | None = None) -> list[tuple[str, str]]:
        """:meth:`problems`, each with the field it is about (a runtime agent's issue path)."""
        found: list[tuple[str, str]] = []
        if self.temperature is not None and not (0 <= self.temperature <= 2):  # nan included
            found.append(("temperature", f"temperature is {self.temperature:g}: give 0 to 2"))
        if self.max_output_tokens is not None and self.max_output_tokens < 1:
            found.append(
                (
                    "max_output_tokens",
                    f"max_output_tokens is {self.max_output_tokens}: give a positive number",
                )
            )
        if self.top_p is not None and not (0 < self.top_p <= 1):
            found.append(("top_p", f"top_p is {self.top_p:g}: give more than 0 and at most 1"))
        if self.stop is not None:
            if not self.stop or any(not s for s in self.stop):
                found.append(("stop", "stop holds no sequence or an empty one: give non-empty strings"))
            elif len(self.stop) > STOP_SEQUENCES_MAX:
                found.append(
                    ("stop", f"stop holds {len(self.stop)} sequences: give at most {STOP_SEQUENCES_MAX}")
                )
        named = self.named_tool
        if named is not None and not named:
            found.append(
                ("tool_choice", "tool_choice names no tool: give NamedTool(tool='<a tool of the agent>')")
            )
        elif tools is not None and named is not None and named not in tools:
            offered = ", ".join(repr(t) for t in sorted(tools)) or "none"
            found.append(
                ("tool_choice", f"tool_choice names tool {named!r}, which is not among its tools ({offered})")
            )
        elif tools is not None and not tools and self.tool_choice == "required":
            found.append(("tool_choice", "tool_choice is 'required' but there are no tools to call"))
        if self.service_tier is not None and not self.service_tier:
            found.append(("service_tier", "service_tier is empty: give the provider's tier name"))
        found.extend(("extra_body", message) for message in extra_body_problems(self.extra_body))
        return found

    def merged(self, other: ModelSettings | None) -> ModelSettings:
        """These settings with the fields ``other`` sets replacing theirs (``extra_body`` merged)."""
        if other is None:
            return self
        changes = other.model_dump(exclude_unset=True, exclude_none=True)
        if self.extra_body and other.extra_body:
            changes["extra_body"] = {**self.extra_body, **other.extra_body}
        return self.model_validate({**self.model_dump(exclude_none=True), **changes})

    def for_call(self, *, offers_tools: bool, after_tool_result: bool) -> ModelSettings:
        """The settings one call sends: no tool settings without tools, ``auto`` once a tool answered.

        See ``tool_choice`` for the rule.
        """
        if not offers_tools:
            return self.model_copy(update={"tool_choice": None, "parallel_tool_calls": None})
        if after_tool_result and self.tool_choice is not None and self.tool_choice not in ("auto", "none"):
            return self.model_copy(update={"tool_choice": "auto"})
        return self

    @property
    def empty(self) -> bool:
        """Whether no field is set."""
        return not self.model_dump(exclude_none=True)

    @property
    def set_fields(self) -> list[str]:
        """The names of the fields set, in declaration order."""
        return list(self.model_dump(exclude_none=True))


def extra_body_problems(extra_body: dict[str, Any] | None) -> list[str]:
    """What is wrong with ``extra_body``'s keys: one line for fields the call sends, one for settings."""
    keys = set(extra_body or {})
    found = []
    owned = sorted(keys & REQUEST_OWNED_FIELDS)
    if owned:
        found.append(
            f"extra_body sets {', '.join(repr(k) for k in owned)}, which the call itself sends: "
            "give the model in model=, tools in tools=, and leave messages, streaming, the output "
            "format and the number of answers to chamvi"
        )
    settings = sorted(keys & SETTING_BODY_FIELDS.keys())
    if settings:
        fields = ", ".join(f"{f}=" for f in sorted({SETTING_BODY_FIELDS[k] for k in settings}))
        found.append(
            f"extra_body sets {', '.join(repr(k) for k in settings)}, which model settings check: "
            f"give {fields} instead"
        )
    return found


def extra_body_of(settings: ModelSettings) -> dict[str, Any]:
    """``settings.extra_body`` for a provider to merge into its body; refused if it sets a checked field.

    A key of ``CHECKED_BODY_FIELDS`` refuses the whole call. The checks of definitions and dispatches
    refuse such settings first; this is the last guard, so that settings built past them
    (``model_construct``, an old run's input) never reach a server.

    Raises:
        ModelError: naming the keys (not retried: the next attempt would send the same).
    """
    problems = extra_body_problems(settings.extra_body)
    if problems:
        raise ModelError(f"model_settings: {'; '.join(problems)}")
    return dict(settings.extra_body or {})


DispatchableSetting = Literal[
    "temperature",
    "max_output_tokens",
    "top_p",
    "stop",
    "seed",
    "tool_choice",
    "parallel_tool_calls",
    "reasoning_effort",
    "service_tier",
    "extra_body",
]
DEFAULT_DISPATCH_ALLOW: frozenset[DispatchableSetting] = frozenset({"temperature", "top_p", "stop", "seed"})
"""What a dispatch may set unless the agent says otherwise: how the answer is sampled, never what it
costs (output tokens, effort, tier, provider extras) nor how tools are chosen."""
_EFFORT_ORDER: tuple[ReasoningEffort, ...] = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
_CAPPED: tuple[DispatchableSetting, ...] = ("max_output_tokens", "reasoning_effort")


class DispatchSettings(BaseModel):
    """Which model settings a dispatch may set for a run of the agent, and how far.

    The agent's definition sets any setting; a dispatcher (``dispatch(model_settings=...)``,
    ``POST /runs``) only these.
    ``DispatchSettings(allow={"temperature", "max_output_tokens"}, max_output_tokens=4096)`` lets a
    dispatch set the temperature and up to 4096 output tokens, nothing else. The two settings that
    cost (``max_output_tokens``, ``reasoning_effort``) are allowed only with their cap.

    Attributes:
        allow: the settings a dispatch may set; by default ``DEFAULT_DISPATCH_ALLOW`` (temperature,
            top_p, stop, seed). An empty set: a dispatch sets none.
        max_output_tokens: the most output tokens a dispatch may ask for.
        reasoning_effort: the highest effort a dispatch may ask for (``none`` < ``minimal`` < ``low``
            < ``medium`` < ``high`` < ``xhigh`` < ``max``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    allow: AbstractSet[DispatchableSetting] = DEFAULT_DISPATCH_ALLOW
    max_output_tokens: int | None = Field(default=None, ge=1, exclude_if=_unset)
    reasoning_effort: ReasoningEffort | None = Field(default=None, exclude_if=_unset)

    @field_serializer("allow")
    def _sorted(self, allow: AbstractSet[str]) -> list[str]:
        # a stored definition compares as its JSON: one order for one set
        return sorted(allow)

    @model_validator(mode="after")
    def _caps(self) -> DispatchSettings:
        for name in _CAPPED:
            capped = getattr(self, name) is not None
            if name in self.allow and not capped:
                raise ValueError(f"allowing {name} needs its cap: give {name}=<the most a dispatch may ask>")
            if capped and name not in self.allow:
                raise ValueError(f"{name}= caps a setting allow does not hold: add {name!r} to allow")
        return self

    def issues(self, agent: str, settings: ModelSettings) -> list[ValidationIssue]:
        """What a dispatch's ``settings`` set past this allow-list or its caps, by field."""
        refused = [name for name in settings.set_fields if name not in self.allow]
        found = [
            ValidationIssue(("model_settings", name), self._refusal(agent, [name]), "setting_not_allowed")
            for name in refused
        ]
        tokens, cap = settings.max_output_tokens, self.max_output_tokens
        if tokens is not None and cap is not None and tokens > cap:
            found.append(
                ValidationIssue(
                    ("model_settings", "max_output_tokens"),
                    f"max_output_tokens is {tokens}: agent {agent!r} lets a dispatch ask for at most {cap}",
                    "setting_over_cap",
                )
            )
        effort, top = settings.reasoning_effort, self.reasoning_effort
        if effort is not None and top is not None and _EFFORT_ORDER.index(effort) > _EFFORT_ORDER.index(top):
            found.append(
                ValidationIssue(
                    ("model_settings", "reasoning_effort"),
                    f"reasoning_effort is {effort!r}: agent {agent!r} lets a dispatch ask for at most "
                    f"{top!r}",
                    "setting_over_cap",
                )
            )
        return found

    def check(self, agent: str, settings: ModelSettings) -> None:
        """Refuses a dispatch's ``settings`` that set what this allow-list does not allow, or past a cap.

        Raises:
            ChamviValidationError: one issue per refused setting, each naming what a dispatch may set.
        """
        found = self.issues(agent, settings)
        if found:
            refused = [str(i.path[-1]) for i in found if i.code == "setting_not_allowed"]
            messages = [self._refusal(agent, refused)] if refused else []
            messages += [i.message for i in found if i.code != "setting_not_allowed"]
            raise ChamviValidationError(f"model_settings: {'; '.join(messages)}", issues=found)

    def _refusal(self, agent: str, names: list[str]) -> str:
        allowed = ", ".join(repr(name) for name in sorted(self.allow)) or "none"
        return (
            f"agent {agent!r} does not let a dispatch set {', '.join(repr(n) for n in names)}: "
            f"a dispatch may set {allowed} (the agent's dispatch_settings say which)"
        )
