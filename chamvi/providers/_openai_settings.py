"""Model settings as Chat Completions parameters: every field has one, for OpenAI and compatible servers."""

from __future__ import annotations

from typing import Any

from chamvi.models import ModelSettings, NamedTool
from chamvi.models.model_settings import extra_body_of


def tool_choice_param(choice: str | NamedTool) -> str | dict[str, Any]:
    """``auto``/``required``/``none`` as they are; a named tool as a function choice."""
    if isinstance(choice, NamedTool):
        return {"type": "function", "function": {"name": choice.tool}}
    return choice


def settings_params(settings: ModelSettings | None, max_tokens_param: str) -> dict[str, Any]:
    """The body fields ``settings`` set.

    ``max_output_tokens`` goes as ``max_tokens_param``, ``stop`` as a list, ``extra_body`` as the
    SDK's ``extra_body`` (merged into the body, so fields the SDK does not know reach the server).

    Raises:
        ModelError: ``extra_body`` sets a field chamvi sets or checks (``CHECKED_BODY_FIELDS``).
    """
    if settings is None:
        return {}
    params: dict[str, Any] = {}
    for field, param in (
        ("temperature", "temperature"),
        ("top_p", "top_p"),
        ("stop", "stop"),
        ("seed", "seed"),
        ("parallel_tool_calls", "parallel_tool_calls"),
        ("reasoning_effort", "reasoning_effort"),
        ("service_tier", "service_tier"),
    ):
        value = getattr(settings, field)
        if value is not None:
            params[param] = value
    if settings.max_output_tokens is not None:
        params[max_tokens_param] = settings.max_output_tokens
    if settings.tool_choice is not None:
        params["tool_choice"] = tool_choice_param(settings.tool_choice)
    extra = extra_body_of(settings)
    if extra:
        params["extra_body"] = extra
    return params
