"""Model settings: checked at definition, per provider, and mapped to each provider's parameters."""

from __future__ import annotations

import pytest

from chamvi import Agent, App, InvalidAgentDefinitionError, define_agent, tool
from chamvi.errors import InvalidAppError, ModelError
from chamvi.models import ModelSettings, NamedTool
from chamvi.providers import AnthropicProvider, ModelRegistry, ScriptedModel, openai_compatible
from chamvi.providers._anthropic_wire import settings_params as anthropic_params
from chamvi.providers._openai_settings import settings_params as openai_params
from chamvi.providers.openai import _body as openai_body


@tool
async def search(query: str) -> str:
    """Searches."""
    return query


def agent(**settings: object) -> Agent:
    return define_agent(
        name="a", model="openai/m", instructions="x", tools=[search], model_settings=settings or None
    )


@pytest.mark.parametrize(
    ("settings", "problem"),
    [
        ({"temperature": 2.5}, "temperature is 2.5: give 0 to 2"),
        ({"temperature": -0.1}, "temperature is -0.1"),
        ({"top_p": 0}, "top_p is 0"),
        ({"top_p": 1.5}, "top_p is 1.5"),
        ({"max_output_tokens": 0}, "max_output_tokens is 0"),
        ({"stop": [""]}, "stop holds no sequence or an empty one"),
        ({"stop": []}, "stop holds no sequence"),
        (
            {"tool_choice": {"tool": "lookup"}},
            "tool_choice names tool 'lookup', which is not among its tools",
        ),
        ({"tool_choice": "search"}, "name a tool with NamedTool(tool='search')"),
        ({"reasoning_effort": "extreme"}, "reasoning_effort"),
        ({"temprature": 1}, "temprature: Extra inputs are not permitted"),
    ],
)
def test_bad_settings_fail_the_definition_naming_the_field(settings: dict, problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        agent(**settings)
    assert "agent 'a': model_settings" in raised.value.message
    assert problem in raised.value.message


def test_required_tool_choice_without_tools_fails_the_definition() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="'required' but there are no tools"):
        define_agent(
            name="a", model="openai/m", instructions="x", model_settings=ModelSettings(tool_choice="required")
        )


def test_settings_as_data_or_object_read_the_same_and_empty_ones_are_none() -> None:
    as_data = agent(temperature=0.2, stop="END", tool_choice={"tool": "search"}, parallel_tool_calls=False)
    assert as_data.model_settings == ModelSettings(
        temperature=0.2, stop=["END"], tool_choice=NamedTool(tool="search"), parallel_tool_calls=False
    )
    assert (
        ModelSettings.model_validate(as_data.model_settings.model_dump(mode="json")) == as_data.model_settings
    )
    assert (
        define_agent(name="b", model="openai/m", instructions="x", model_settings={}).model_settings is None
    )


def test_a_named_tool_of_a_factory_agent_is_checked_when_a_run_starts_not_at_definition() -> None:
    built = define_agent(
        name="a",
        model="openai/m",
        instructions="x",
        tools=lambda ctx: [search],
        model_settings=ModelSettings(tool_choice=NamedTool(tool="later")),
    )
    assert built.model_settings is not None and built.model_settings.named_tool == "later"


def test_a_forced_tool_choice_gives_way_to_auto_after_the_first_tool_result() -> None:
    settings = ModelSettings(tool_choice="required", parallel_tool_calls=False, temperature=0)
    assert settings.for_call(offers_tools=True, after_tool_result=False) == settings
    assert settings.for_call(offers_tools=True, after_tool_result=True).tool_choice == "auto"
    assert (
        ModelSettings(tool_choice="none").for_call(offers_tools=True, after_tool_result=True).tool_choice
        == "none"
    )
    no_tools = settings.for_call(offers_tools=False, after_tool_result=False)
    assert (no_tools.tool_choice, no_tools.parallel_tool_calls, no_tools.temperature) == (None, None, 0)


def test_a_call_s_settings_replace_the_agent_s_field_by_field_and_merge_extra_body() -> None:
    base = ModelSettings(temperature=0.2, max_output_tokens=100, extra_body={"top_k": 5, "min_p": 0.1})
    merged = base.merged(ModelSettings(temperature=0.9, extra_body={"top_k": 20}))
    assert merged == ModelSettings(
        temperature=0.9, max_output_tokens=100, extra_body={"top_k": 20, "min_p": 0.1}
    )


ALL = ModelSettings(
    temperature=0.3,
    max_output_tokens=256,
    top_p=0.9,
    stop=["END"],
    seed=7,
    tool_choice=NamedTool(tool="search"),
    parallel_tool_calls=False,
    reasoning_effort="low",
    extra_body={"top_k": 20},
)


def test_every_setting_maps_to_a_chat_completions_parameter() -> None:
    assert openai_params(ALL, "max_completion_tokens") == {
        "temperature": 0.3,
        "max_completion_tokens": 256,
        "top_p": 0.9,
        "stop": ["END"],
        "seed": 7,
        "tool_choice": {"type": "function", "function": {"name": "search"}},
        "parallel_tool_calls": False,
        "reasoning_effort": "low",
        "extra_body": {"top_k": 20},
    }
    assert openai_params(ModelSettings(max_output_tokens=9, tool_choice="required"), "max_tokens") == {
        "max_tokens": 9,
        "tool_choice": "required",
    }
    assert openai_params(None, "max_tokens") == {}


def test_settings_map_to_messages_api_parameters() -> None:
    assert anthropic_params(ALL.model_copy(update={"seed": None}), 8192) == {
        "max_tokens": 256,
        "stop_sequences": ["END"],
        "tool_choice": {"type": "tool", "name": "search", "disable_parallel_tool_use": True},
        "output_config": {"effort": "low"},
        "extra_body": {"temperature": 0.3, "top_p": 0.9, "top_k": 20},
    }
    assert anthropic_params(None, 8192) == {"max_tokens": 8192}
    assert anthropic_params(ModelSettings(tool_choice="required"), 10)["tool_choice"] == {"type": "any"}
    assert anthropic_params(ModelSettings(tool_choice="none", parallel_tool_calls=False), 10)[
        "tool_choice"
    ] == {"type": "none"}
    assert anthropic_params(ModelSettings(parallel_tool_calls=False), 10)["tool_choice"] == {
        "type": "auto",
        "disable_parallel_tool_use": True,
    }


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        (ModelSettings(seed=1), "seed: Anthropic's Messages API has no seed"),
        (ModelSettings(temperature=1.5), "temperature 1.5: Anthropic takes 0 to 1"),
        (ModelSettings(reasoning_effort="minimal"), "reasoning_effort 'minimal'"),
    ],
)
def test_the_app_refuses_settings_the_agent_s_provider_does_not_support(
    settings: ModelSettings, refused: str
) -> None:
    claude = define_agent(name="c", model="anthropic/claude-x", instructions="x", model_settings=settings)
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        App(agents=[claude])
    assert "agent 'c': model 'anthropic/claude-x' does not support its model_settings" in raised.value.message
    assert refused in raised.value.message


def test_providers_without_a_rule_take_every_setting() -> None:
    models = ModelRegistry()
    models.register("scripted/s", ScriptedModel([]))
    agents = [
        define_agent(
            name=name, model=ref, instructions="x", model_settings=ModelSettings(seed=3, temperature=2)
        )
        for name, ref in (("o", "openai/m"), ("l", "local/demo"), ("s", "scripted/s"), ("v", "vllm/q"))
    ]
    App(agents=agents, models=[models, openai_compatible("vllm", base_url="http://127.0.0.1:1/v1")])


def test_app_models_take_named_providers_and_refuse_anything_else() -> None:
    app = App(
        agents=[define_agent(name="a", model="work/claude-x", instructions="x")],
        models=[
            AnthropicProvider(name="work", api_key="k"),
            openai_compatible("ollama", base_url="http://h/v1"),
        ],
    )
    assert app.model_for(app.agent("a"))[1].ref == "work/claude-x"  # type: ignore[attr-defined]
    assert app.models.resolve("ollama/llama3.2").ref == "ollama/llama3.2"  # type: ignore[attr-defined]
    with pytest.raises(InvalidAppError, match="is not a provider"):
        App(agents=[], models=["ollama"])  # type: ignore[list-item]
    with pytest.raises(InvalidAppError, match="provider name 'Ollama'"):
        openai_compatible("Ollama", base_url="http://h/v1")
    with pytest.raises(InvalidAppError, match="base_url 'localhost:11434' must be an http"):
        openai_compatible("ollama", base_url="localhost:11434")


@pytest.mark.parametrize(
    ("extra_body", "problem"),
    [
        ({"temperature": 2}, "extra_body sets 'temperature', which model settings check: give temperature="),
        ({"tool_choice": "none"}, "extra_body sets 'tool_choice', which model settings check"),
        (
            {"max_tokens": 10**9},
            "extra_body sets 'max_tokens', which model settings check: give max_output_tokens=",
        ),
        ({"service_tier": "priority"}, "extra_body sets 'service_tier', which model settings check"),
        ({"n": 128}, "extra_body sets 'n', which the call itself sends"),
        ({"messages": []}, "extra_body sets 'messages', which the call itself sends"),
    ],
)
def test_extra_body_that_sets_a_checked_field_fails_the_definition(extra_body: dict, problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        agent(extra_body={**extra_body, "top_k": 20})
    assert problem in raised.value.message


def test_a_provider_refuses_extra_body_that_sets_a_checked_field_even_past_the_checks() -> None:
    # settings built without their checks (an old run's input): the provider is the last guard
    past = ModelSettings(temperature=0.1, extra_body={"temperature": 2, "n": 128, "top_k": 20})
    with pytest.raises(ModelError, match=r"extra_body sets 'n'.*extra_body sets 'temperature'"):
        openai_params(past, "max_tokens")
    with pytest.raises(ModelError, match="extra_body sets 'temperature'"):
        anthropic_params(past, 8192)


def test_the_fields_a_call_sets_win_over_extra_body_in_the_chat_completions_body() -> None:
    body = openai_body({"model": "m", "temperature": 0.1, "extra_body": {"temperature": 2, "top_k": 20}})
    assert body == {"model": "m", "temperature": 0.1, "top_k": 20}


def test_service_tier_is_a_setting_of_its_own() -> None:
    assert openai_params(ModelSettings(service_tier="flex"), "max_tokens") == {"service_tier": "flex"}
    assert anthropic_params(ModelSettings(service_tier="auto"), 10)["service_tier"] == "auto"
    claude = define_agent(
        name="c", model="anthropic/claude-x", instructions="x", model_settings={"service_tier": "flex"}
    )
    with pytest.raises(
        InvalidAgentDefinitionError, match="service_tier 'flex': Anthropic's tiers are 'auto'"
    ):
        App(agents=[claude])


def test_a_dispatch_may_set_sampling_settings_by_default_and_what_the_agent_allows_within_its_caps() -> None:
    assert agent().dispatch_settings.allow == {"temperature", "top_p", "stop", "seed"}
    allowed = define_agent(
        name="a",
        model="openai/m",
        instructions="x",
        dispatch_settings={
            "allow": ["max_output_tokens", "reasoning_effort"],
            "max_output_tokens": 100,
            "reasoning_effort": "low",
        },
    ).dispatch_settings
    assert allowed.issues("a", ModelSettings(max_output_tokens=100, reasoning_effort="minimal")) == []
    assert [
        (i.path, i.code) for i in allowed.issues("a", ModelSettings(temperature=1, reasoning_effort="high"))
    ] == [
        (("model_settings", "temperature"), "setting_not_allowed"),
        (("model_settings", "reasoning_effort"), "setting_over_cap"),
    ]
    assert allowed.model_dump(mode="json") == {
        "allow": ["max_output_tokens", "reasoning_effort"],
        "max_output_tokens": 100,
        "reasoning_effort": "low",
    }


@pytest.mark.parametrize(
    ("dispatch_settings", "problem"),
    [
        ({"allow": ["max_output_tokens"]}, "allowing max_output_tokens needs its cap"),
        ({"allow": ["temperature"], "reasoning_effort": "low"}, "add 'reasoning_effort' to allow"),
        ({"allow": ["model"]}, "allow.0: Input should be 'temperature'"),
        ("temperature", "dispatch_settings must be a DispatchSettings(...)"),
    ],
)
def test_bad_dispatch_settings_fail_the_definition(dispatch_settings: object, problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError) as raised:
        define_agent(name="a", model="openai/m", instructions="x", dispatch_settings=dispatch_settings)  # type: ignore[arg-type]
    assert "agent 'a': dispatch_settings" in raised.value.message
    assert problem in raised.value.message
