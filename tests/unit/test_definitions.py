"""Agent, tool and app definitions refuse mistakes with messages that name them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import BaseModel

from chamvi import (
    App,
    Budget,
    InvalidAgentDefinitionError,
    ToolContext,
    console_channel,
    define_agent,
    effect_tool,
    tool,
)
from chamvi.errors import InvalidAppError


@tool
async def lookup(order_id: str, verbose: bool = False) -> str:
    """Looks an order up."""
    return order_id


class Refund(BaseModel):
    order_id: str
    amount: float


@effect_tool
async def refund(request: Refund, ctx: ToolContext) -> str:
    """Refunds."""
    return request.order_id


@pytest.mark.parametrize("name", ["Support", "support_bot", "-x", "x-", "a--b", "", "a" * 65, 7])
def test_invalid_agent_names_are_refused(name: object) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="agent name"):
        define_agent(name=name, instructions="x")  # type: ignore[arg-type]


def test_the_default_budget_is_20_steps_and_900_seconds() -> None:
    agent = define_agent(name="a" * 64, instructions="Hi.")
    assert agent.budget == Budget(max_steps=20, max_tokens=None, timeout=timedelta(seconds=900))


@pytest.mark.parametrize(
    ("budget", "field"),
    [
        (Budget(max_steps=0), "max_steps"),
        (Budget(max_tokens=0), "max_tokens"),
        (Budget(timeout=timedelta(0)), "timeout"),
    ],
)
def test_invalid_budgets_name_the_field(budget: Budget, field: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=field):
        define_agent(name="a", instructions="x", budget=budget)


def test_structured_instructions_keep_their_order_and_roles() -> None:
    agent = define_agent(
        name="reporter",
        instructions=[
            {"role": "system", "content": "Summarize."},
            {"role": "user", "content": "All checks passed."},
            {"role": "assistant", "content": "Ready to release."},
        ],
    )
    assert [m.role for m in agent.instructions] == ["system", "user", "assistant"]


@pytest.mark.parametrize(
    "instructions", [[], [{"role": "tool", "content": "x"}], [{"role": "user"}], [{"nope": 1}], 3]
)
def test_invalid_instructions_are_refused(instructions: object) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="instructions"):
        define_agent(name="a", instructions=instructions)  # type: ignore[arg-type]


def test_tool_schema_comes_from_type_hints_and_the_docstring() -> None:
    assert lookup.description == "Looks an order up."
    schema = lookup.json_schema()
    assert schema["required"] == ["order_id"]
    assert schema["properties"]["verbose"]["default"] is False
    assert schema["additionalProperties"] is False
    assert lookup.context_param is None


def test_a_single_pydantic_parameter_is_the_input_schema_and_the_context_is_not_an_argument() -> None:
    assert refund.model_param == "request" and refund.context_param == "ctx"
    assert set(refund.json_schema()["properties"]) == {"order_id", "amount"}
    assert refund.effect is not None


def test_the_default_effect_key_is_run_tool_and_input_hash() -> None:
    key = refund.default_effect_key("run-1", Refund(order_id="A", amount=1.0))
    again = refund.default_effect_key("run-1", Refund(amount=1.0, order_id="A"))
    prefix, _, digest = key.rpartition(":")
    assert prefix == "run-1:refund" and len(digest) == 64 and key == again


def test_a_tool_without_description_is_refused() -> None:
    def bare(x: int) -> int:
        return x

    with pytest.raises(InvalidAgentDefinitionError, match="description"):
        tool(bare)


def test_duplicate_tool_names_are_refused() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="two tools are named 'lookup'"):
        define_agent(name="a", instructions="x", tools=[lookup, lookup])


def test_an_app_refuses_duplicate_agents_unknown_models_and_unknown_channels() -> None:
    agent = define_agent(name="a", instructions="x", model="local/demo")
    with pytest.raises(InvalidAppError, match="two agents are named 'a'"):
        App(agents=[agent, agent])
    with pytest.raises(InvalidAgentDefinitionError, match="'nowhere/x' does not resolve"):
        App(agents=[define_agent(name="b", instructions="x", model="nowhere/x")])
    with pytest.raises(InvalidAgentDefinitionError, match="has no model"):
        App(agents=[define_agent(name="c", instructions="x")])
    with pytest.raises(InvalidAgentDefinitionError, match="unknown channel 'slack'"):
        App(agents=[define_agent(name="d", instructions="x", model="local/demo", channels=["slack"])])
    with pytest.raises(InvalidAppError, match="two channels are named 'console'"):
        App(agents=[], channels=[console_channel(), console_channel()])


def test_provide_refuses_none_foreign_keys_and_a_second_value() -> None:
    from chamvi import define_context_key

    app = App(agents=[])
    key = define_context_key("client")
    app.provide(key, object())
    with pytest.raises(InvalidAppError, match="already has a value"):
        app.provide(key, object())
    with pytest.raises(InvalidAppError, match="not None"):
        app.provide(define_context_key("other"), None)
    with pytest.raises(InvalidAppError, match="not a context key"):
        app.provide("client", 1)  # type: ignore[arg-type]


def test_every_seed_error_code_is_stable() -> None:
    from chamvi import ErrorCode

    seed_codes = {
        "budget_exceeded",
        "timeout",
        "validation_error",
        "incomplete_response",
        "tool_not_allowed",
        "tool_denied",
        "channel_not_found",
        "context_not_provided",
        "fatal_tool_error",
        "run_not_found",
        "invalid_agent_definition",
    }
    assert seed_codes <= set(ErrorCode.values())
    assert len(set(ErrorCode.values())) == len(ErrorCode)  # one class per code
