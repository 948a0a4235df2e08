"""The environment is read in one place: ``chamvi.settings``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from chamvi.errors import ChamviValidationError
from chamvi.settings import (
    ProviderConfig,
    Settings,
    anthropic_credentials,
    hf_hub_offline,
    key_hosts,
    openai_credentials,
    parse_providers,
    read_variable,
)

ROOT = Path(__file__).resolve().parents[2]


def test_only_the_settings_module_reads_the_environment() -> None:
    readers = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("chamvi", "workflows", "activities")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path != ROOT / "chamvi" / "settings.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"os\.environ|getenv\(", line)
    ]
    assert readers == []


def test_the_api_tokens_come_with_the_settings_and_stay_out_of_their_repr() -> None:
    settings = Settings.from_env({"CHAMVI_TOKENS": '[{"value": "s3cret", "id": "a", "permissions": ["*"]}]'})
    assert settings.tokens is not None and "s3cret" in settings.tokens
    assert "s3cret" not in repr(settings)
    assert Settings.from_env({}).tokens is None


def test_late_readers_take_the_variable_as_it_is_when_asked() -> None:
    assert openai_credentials({"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": ""}) == ("k", None)
    assert openai_credentials({}) == (None, None)
    offline = [hf_hub_offline({"HF_HUB_OFFLINE": v}) for v in ("1", "On", "no", "")]
    assert offline == [True, True, False, False]


# ---- CHAMVI_PROVIDERS ---------------------------------------------------------------------------


def test_named_providers_come_from_a_json_object_with_their_key_s_variable_name() -> None:
    raw = json.dumps(
        {
            "ollama": {"base_url": "http://localhost:11434/v1"},
            "vllm": {"base_url": "https://vllm.internal/v1", "api_key_env": "VLLM_KEY", "timeout": 30},
            "claude-work": {"api": "anthropic", "api_key_env": "WORK_ANTHROPIC_KEY", "stream": False},
        }
    )
    assert Settings.from_env({"CHAMVI_PROVIDERS": raw}).providers == (
        ProviderConfig(name="ollama", base_url="http://localhost:11434/v1"),
        ProviderConfig(
            name="vllm", base_url="https://vllm.internal/v1", api_key_env="VLLM_KEY", timeout=30.0
        ),
        ProviderConfig(name="claude-work", api="anthropic", api_key_env="WORK_ANTHROPIC_KEY", stream=False),
    )
    assert Settings.from_env({}).providers == () == parse_providers("  ")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{ollama: 1}", "CHAMVI_PROVIDERS is not JSON (Expecting property name"),
        ('["ollama"]', "CHAMVI_PROVIDERS must be a JSON object of providers by name"),
        ('{"Ollama": {"base_url": "http://h/v1"}}', "provider name 'Ollama' must be 1-64 lowercase"),
        ('{"a/b": {"base_url": "http://h/v1"}}', "provider name 'a/b'"),
        ('{"ollama": "http://h/v1"}', "provider 'ollama' must be an object"),
        ('{"ollama": {}}', "provider 'ollama' has no base_url"),
        (
            '{"ollama": {"base_url": "localhost:11434"}}',
            "provider 'ollama': base_url 'localhost:11434' must be",
        ),
        (
            '{"ollama": {"base_url": "http://h/v1", "api_key": "sk-1"}}',
            "provider 'ollama' has unknown field 'api_key' (keys go in a variable of their own",
        ),
        (
            '{"ollama": {"base_url": "http://h/v1", "api_key_env": "MY-KEY"}}',
            "api_key_env 'MY-KEY' must name",
        ),
        ('{"ollama": {"base_url": "http://h/v1", "api": "gemini"}}', "api 'gemini' must be 'openai' or"),
        ('{"ollama": {"base_url": "http://h/v1", "stream": "no"}}', "stream 'no' must be true or false"),
        ('{"ollama": {"base_url": "http://h/v1", "timeout": -1}}', "timeout -1 must be a positive number"),
    ],
)
def test_a_bad_providers_entry_is_refused_naming_it_and_the_fix(raw: str, message: str) -> None:
    with pytest.raises(ChamviValidationError) as raised:
        Settings.from_env({"CHAMVI_PROVIDERS": raw})
    assert message in raised.value.message


@pytest.mark.parametrize(
    "variable",
    ["CHAMVI_APPROVAL_SECRET", "CHAMVI_TOKENS", "CHAMVI_TICKETS_SECRET", "chamvi_api_token", "GITHUB_TOKEN"],
)
def test_a_providers_entry_may_not_send_one_of_chamvi_s_own_secrets_as_its_key(variable: str) -> None:
    raw = json.dumps({"gateway": {"base_url": "https://gw.example/v1", "api_key_env": variable}})
    with pytest.raises(ChamviValidationError) as raised:
        Settings.from_env({"CHAMVI_PROVIDERS": raw})
    assert raised.value.message == (
        f"CHAMVI_PROVIDERS: provider 'gateway': api_key_env {variable!r} names one of chamvi's own "
        "variables, which never go to a model provider (no CHAMVI_* variable, nor GITHUB_TOKEN, "
        'SLACK_BOT_TOKEN): put the key in a variable of its own, e.g. "OLLAMA_API_KEY"'
    )


def test_each_key_variable_is_mapped_to_the_hosts_it_is_sent_to() -> None:
    configs = parse_providers(
        json.dumps(
            {
                "gateway": {"base_url": "https://GW.example:8443/v1", "api_key_env": "OPENAI_API_KEY"},
                "ollama": {"base_url": "http://localhost:11434/v1"},  # no key: sends none
                "claude-proxy": {"api": "anthropic", "base_url": "https://proxy.example"},
                "claude-work": {"api": "anthropic", "api_key_env": "WORK_ANTHROPIC_KEY"},
            }
        )
    )
    assert key_hosts(configs, {}) == {
        "OPENAI_API_KEY": {"gw.example": ["gateway"], "api.openai.com": ["openai"]},
        "ANTHROPIC_API_KEY": {"proxy.example": ["claude-proxy"], "api.anthropic.com": ["anthropic"]},
        "WORK_ANTHROPIC_KEY": {"api.anthropic.com": ["claude-work"]},
    }
    env = {"OPENAI_BASE_URL": "https://gw.example/v1", "ANTHROPIC_BASE_URL": "https://proxy.example"}
    assert key_hosts(configs, env) == {
        "OPENAI_API_KEY": {"gw.example": ["gateway", "openai"]},
        "ANTHROPIC_API_KEY": {"proxy.example": ["claude-proxy", "anthropic"]},
        "WORK_ANTHROPIC_KEY": {"proxy.example": ["claude-work"]},
    }
    # an entry named like a built-in replaces it: its key goes only where the entry says
    replaced = parse_providers(json.dumps({"openai": {"base_url": "http://h/v1", "api_key_env": "K"}}))
    assert "OPENAI_API_KEY" not in key_hosts(replaced, {})


def test_an_app_serves_the_environment_s_providers_which_replace_the_code_s_of_one_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chamvi import App, define_agent
    from chamvi.providers import openai_compatible

    monkeypatch.setenv(
        "CHAMVI_PROVIDERS",
        json.dumps({"ollama": {"base_url": "http://gpu-box:11434/v1"}, "vllm": {"base_url": "http://v/v1"}}),
    )
    app = App(
        agents=[define_agent(name="a", model="vllm/qwen", instructions="x")],
        models=[openai_compatible("ollama", base_url="http://localhost:11434/v1")],
    )
    ollama = app.models.resolve("ollama/llama3.2")
    assert str(ollama.client.base_url) == "http://gpu-box:11434/v1/"  # type: ignore[attr-defined]
    assert app.model_for(app.agent("a"))[1].ref == "vllm/qwen"  # type: ignore[attr-defined]


def test_a_provider_s_key_variable_is_read_when_its_first_call_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chamvi.errors import ProviderHTTPError
    from chamvi.providers._registry import environment_registry

    registry = environment_registry(
        parse_providers('{"vllm": {"base_url": "http://v/v1", "api_key_env": "VLLM_KEY"}}')
    )
    model = registry.resolve("vllm/qwen")
    monkeypatch.delenv("VLLM_KEY", raising=False)
    with pytest.raises(ProviderHTTPError, match="VLLM_KEY is not set"):
        _ = model.client  # type: ignore[attr-defined]
    monkeypatch.setenv("VLLM_KEY", "k-v")
    assert model.client.api_key == "k-v"  # type: ignore[attr-defined]
    assert read_variable("VLLM_KEY", {"VLLM_KEY": ""}) is None
    assert anthropic_credentials({"ANTHROPIC_API_KEY": "a", "ANTHROPIC_BASE_URL": "http://x"}) == (
        "a",
        "http://x",
    )
