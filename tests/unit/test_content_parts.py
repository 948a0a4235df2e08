"""Content parts and instructions as native messages: the shared model, definitions, tool results."""

from __future__ import annotations

import asyncio
import base64

import pytest

from chamvi import (
    App,
    FilePart,
    ImagePart,
    Message,
    TextPart,
    ToolContext,
    artifact_file_part,
    define_agent,
    tool,
)
from chamvi._constants import INLINE_PART_MAX_BYTES
from chamvi._tool_runner import ToolRunner
from chamvi._transcript import EMPTY_DIGEST, chain_digest
from chamvi.errors import InvalidAgentDefinitionError, InvalidInputError
from chamvi.models import Artifact, ToolCall, ToolRequest, TriggerEnvelope, tool_output_parts
from chamvi.worker_state import AppRuntime
from tests.unit.test_tool_runner import InMemoryRun

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
CHART = Artifact(
    id="run-1.0001", run_id="run-1", media_type="image/png", filename="chart.png", size=9, sha256="ab"
)


# ---- the message model ----------------------------------------------------------------------


def test_a_message_recorded_before_parts_reads_and_is_stored_as_it_was() -> None:
    recorded = {
        "role": "tool",
        "content": "3",
        "tool_calls": [],
        "tool_call_id": "c",
        "name": "add",
        "is_error": False,
    }

    message = Message.model_validate(recorded)

    assert message.parts == [] and message.content == "3"
    assert message.model_dump(mode="json") == recorded  # so its transcript digest is unchanged
    assert chain_digest(EMPTY_DIGEST, [message]) == chain_digest(
        EMPTY_DIGEST, [Message.model_validate(recorded)]
    )


def test_parts_given_as_content_are_the_messages_parts_and_their_text_its_content() -> None:
    message = Message.model_validate(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is on it?"},
                {"type": "image", "media_type": "image/png", "data": base64.b64encode(PNG).decode()},
                {"type": "text", "text": "Be brief."},
            ],
            "provider_options": {"openai": {"name": "example"}},
        }
    )

    assert message.content == "What is on it?\nBe brief."
    assert [p.type for p in message.parts] == ["text", "image", "text"]
    [image] = message.media
    assert isinstance(image, ImagePart) and image.data == PNG
    assert Message.model_validate_json(message.model_dump_json()) == message


def test_a_file_part_of_an_artifact_takes_its_media_type_and_name_and_stores_the_reference_only() -> None:
    part = artifact_file_part(CHART)

    assert (part.media_type, part.filename, part.artifact) == ("image/png", "chart.png", CHART)
    assert part.model_dump(mode="json") == {
        "type": "file",
        "media_type": "image/png",
        "artifact": CHART.model_dump(mode="json"),
        "filename": "chart.png",
    }


def test_artifact_file_part_refuses_what_is_not_an_artifact() -> None:
    with pytest.raises(InvalidInputError, match="takes an Artifact"):
        artifact_file_part("run-1.0001")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        ({"type": "image", "media_type": "application/pdf", "url": "https://x/a.pdf"}, "must be image/"),
        ({"type": "image", "url": "https://x/a.png", "data": "AA=="}, "exactly one of artifact, data, url"),
        ({"type": "file", "url": "https://x/a.pdf"}, "needs its media_type"),
        ({"type": "file", "media_type": "text/plain; charset=utf-8", "data": "AA=="}, "without parameters"),
        ({"type": "image", "url": "file:///etc/passwd"}, "https://, http:// or data: URL"),
        ({"type": "video", "url": "https://x/a.mp4"}, "does not match any of the expected tags"),
    ],
)
def test_a_malformed_part_is_refused_naming_the_problem(part: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Message.model_validate({"role": "user", "content": [part]})


def test_inline_data_is_small_or_refused() -> None:
    with pytest.raises(ValueError, match="store the file as an artifact, or give a url"):
        ImagePart(media_type="image/png", data=b"x" * (INLINE_PART_MAX_BYTES + 1))


# ---- instructions ---------------------------------------------------------------------------


def test_instructions_as_native_messages_keep_their_order_parts_and_options() -> None:
    agent = define_agent(
        name="reporter",
        instructions=[
            {"role": "system", "content": "Summarize the report."},
            Message(
                role="user",
                parts=[
                    TextPart(text="An example:"),
                    ImagePart(
                        url="https://example.com/ok.png", provider_options={"openai": {"detail": "low"}}
                    ),
                    FilePart(media_type="application/pdf", data=b"%PDF-1.4", filename="ok.pdf"),
                ],
            ),
            {"role": "assistant", "content": [{"type": "text", "text": "Ready to release."}]},
            {"role": "system", "content": "A later system block stays in place."},
        ],
    )

    assert [m.role for m in agent.instructions] == ["system", "user", "assistant", "system"]
    user = agent.instructions[1]
    assert [p.type for p in user.parts] == ["text", "image", "file"]
    assert user.parts[1].provider_options == {"openai": {"detail": "low"}}
    assert agent.instructions[2].content == "Ready to release."


@pytest.mark.parametrize(
    ("instructions", "problem"),
    [
        ([], "non-empty list"),
        (
            [{"role": "system", "content": [{"type": "text", "text": "x"}]}],
            "a system message's content is a string",
        ),
        (
            [
                {
                    "role": "user",
                    "content": [{"type": "image", "media_type": "text/plain", "url": "https://x/y"}],
                }
            ],
            r"instructions\[0\] is not a message: parts\.0\.image: .*must be image/",
        ),
        (
            [{"role": "assistant", "content": [{"type": "image", "url": "https://x/y.png"}]}],
            "an assistant's parts are text",
        ),
        ([{"role": "user", "content": []}], "has no content"),
        ([{"role": "user", "content": ""}], "has no content"),
        ([{"role": "tool", "content": "x", "tool_call_id": "c"}], "system, user or assistant"),
    ],
)
def test_instructions_that_cannot_be_are_refused_at_definition(instructions: object, problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=problem):
        define_agent(name="a", instructions=instructions)  # type: ignore[arg-type]


# ---- tool results made of parts -------------------------------------------------------------


def test_a_tool_result_of_file_parts_reads_as_parts_and_any_other_result_does_not() -> None:
    marker = artifact_file_part(CHART).model_dump(mode="json")

    assert tool_output_parts(marker) == [artifact_file_part(CHART)]
    assert tool_output_parts(["The chart:", marker]) == [
        TextPart(text="The chart:"),
        artifact_file_part(CHART),
    ]
    assert tool_output_parts(["a", "b"]) is None
    assert tool_output_parts({"type": "file", "path": "/tmp/x"}) is None  # a dict that is not exactly a part
    assert tool_output_parts([marker, {"rows": 3}]) is None
    assert tool_output_parts("file") is None
    # an MCP tool's content blocks are JSON of their own, not chamvi's parts
    assert tool_output_parts([{"type": "image", "data": "AA==", "mimeType": "image/png"}]) is None


@tool
async def render(ctx: ToolContext) -> list[object]:
    """Renders a chart and hands it to the model."""
    chart = await ctx.artifacts.put("image/png", PNG, filename="chart.png")
    return ["This week's chart:", artifact_file_part(chart)]


@tool
async def inline() -> FilePart:
    """Returns bytes inline, which a run's history must not hold."""
    return FilePart(media_type="image/png", data=PNG)


def _request(name: str) -> ToolRequest:
    return ToolRequest(
        run_id="run-1", agent="painter", step=0, call=ToolCall(id="c1", name=name), trigger=TriggerEnvelope()
    )


async def test_a_tool_returning_an_artifact_file_part_records_the_reference_and_the_artifact() -> None:
    app = App(
        agents=[define_agent(name="painter", instructions="x", model="local/demo", tools=[render, inline])]
    )
    runtime = AppRuntime(app)

    result = await ToolRunner(runtime).run(_request("render"), InMemoryRun(), asyncio.Event())

    assert result.status == "ok", result.error
    [stored] = result.artifacts
    assert result.output == ["This week's chart:", artifact_file_part(stored).model_dump(mode="json")]
    assert "base64" not in result.model_dump_json() and await runtime.artifacts.read(stored.id) == PNG


async def test_a_tool_returning_inline_bytes_as_a_part_is_a_tool_error_naming_the_fix() -> None:
    app = App(
        agents=[define_agent(name="painter", instructions="x", model="local/demo", tools=[render, inline])]
    )

    result = await ToolRunner(AppRuntime(app)).run(_request("inline"), InMemoryRun(), asyncio.Event())

    assert result.status == "error" and result.output is None
    assert result.error is not None and result.error.code == "validation_error"
    assert "return artifact_file_part(artifact)" in result.error.message
