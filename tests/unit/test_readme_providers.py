"""docs/guides/providers.md's examples, run from the page so they cannot drift."""

from __future__ import annotations

import re
import shlex

import pytest

from chamvi import Agent, App, tool
from chamvi.errors import ChamviValidationError
from chamvi.models import ModelSettings
from chamvi.settings import Settings
from tests.support.docs import blocks, page

SECTION = page("guides/providers.md")


@tool
async def label(name: str) -> str:
    """Labels."""
    return name


def test_the_readme_app_with_named_providers_builds_and_resolves_every_ref() -> None:
    code = re.search(r"```python\n(.*?)```", SECTION, re.DOTALL)
    assert code is not None
    namespace: dict[str, object] = {"label": label}
    exec(code.group(1), namespace)
    app = namespace["app"]
    assert isinstance(app, App)
    assert app.models.resolve("vllm/qwen3").ref == "vllm/qwen3"  # type: ignore[attr-defined]
    assert app.models.resolve("claude-work/claude-opus-4-1").ref == "claude-work/claude-opus-4-1"  # type: ignore[attr-defined]
    writer = app.agent("writer")
    assert writer.model_settings is not None and writer.model_settings.max_output_tokens == 1024


def test_the_readme_chamvi_providers_example_parses() -> None:
    shell = re.search(r"```sh\n(.*?)```", SECTION, re.DOTALL)
    assert shell is not None
    name, _, value = shlex.split(shell.group(1))[0].partition("=")
    providers = Settings.from_env({name: value}).providers
    assert [(p.name, p.api, p.api_key_env) for p in providers] == [
        ("ollama", "openai", None),
        ("vllm", "openai", "VLLM_API_KEY"),
        ("claude-work", "anthropic", "WORK_ANTHROPIC_KEY"),
    ]


def test_the_dispatch_settings_example_caps_what_a_dispatch_sets_with_the_message_shown() -> None:
    [code] = blocks("guides/providers.md", "## What a dispatch may set", "python")
    [shown] = blocks("guides/providers.md", "## What a dispatch may set", "text")
    namespace: dict[str, object] = {}
    exec(code.body, namespace)
    writer = namespace["writer"]
    assert isinstance(writer, Agent)
    settings = writer.dispatch_settings
    assert settings.issues("writer", ModelSettings(max_output_tokens=4096, reasoning_effort="medium")) == []
    with pytest.raises(ChamviValidationError) as refused:
        settings.check("writer", ModelSettings(service_tier="priority"))
    assert refused.value.message == " ".join(shown.body.split())
    with pytest.raises(ChamviValidationError, match="max_output_tokens is 4097: agent 'writer' lets"):
        settings.check("writer", ModelSettings(max_output_tokens=4097))
