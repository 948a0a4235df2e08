"""docs/guides/providers.md's examples, run from the page so they cannot drift."""

from __future__ import annotations

import re
import shlex

from chamvi import App, tool
from chamvi.settings import Settings
from tests.support.docs import page

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
