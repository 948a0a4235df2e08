"""Instructions with parts and ``artifact_file_part`` through real runs and a loopback OpenAI server.

The model gets the bytes (inline instructions, an attachment, a tool's file); the run's history holds
references only.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from temporalio.client import Client

from chamvi import (
    App,
    ChamviClient,
    FilePart,
    ImagePart,
    Message,
    RunStatus,
    TextPart,
    ToolContext,
    artifact_file_part,
    define_agent,
    tool,
)
from chamvi.artifacts import ArtifactStore, Attachment
from chamvi.models import Artifact
from chamvi.providers import AnthropicProvider, ModelRegistry, OpenAIProvider, ScriptedModel, call, reply
from chamvi.runtime import build_worker
from tests.support.anthropic_server import AnthropicServer
from tests.support.anthropic_server import text as claude_text
from tests.support.anthropic_server import tool_use as claude_tool_use
from tests.support.docs import python_module
from tests.support.openai_server import OpenAIServer, text, tool_call

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
CHART = PNG + b"-the-chart"
EXAMPLE = PNG + b"-an-example"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def payloads(client: Client, run_id: str) -> str:
    """Every payload of the run's history, decoded: what Temporal stores for it, as text."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if "metadata" in node and isinstance(node.get("data"), str):
                found.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads((await client.get_workflow_handle(run_id).fetch_history()).to_json()))
    return "\n".join(found)


@tool
async def render_chart(ctx: ToolContext) -> list[str | FilePart]:
    """Renders this week's chart and shows it to the model."""
    chart = await ctx.artifacts.put("image/png", CHART, filename="chart.png")
    return ["This week's chart:", artifact_file_part(chart)]


INSTRUCTIONS = [
    Message(role="system", content="You read charts."),
    Message(
        role="user",
        parts=[
            TextPart(text="A chart that looks fine:"),
            ImagePart(media_type="image/png", data=EXAMPLE, provider_options={"openai": {"detail": "low"}}),
        ],
        provider_options={"openai": {"name": "example"}},
    ),
    Message(role="assistant", content="Fine: no dip."),
]


async def test_instruction_parts_an_attachment_and_a_tools_file_reach_the_model_and_history_keeps_references(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = ArtifactStore.local(tmp_path / "artifacts")
    with OpenAIServer() as server:
        server.add(tool_call("render_chart", {}), text("A dip on Tuesday."))
        app = App(
            agents=[
                define_agent(
                    name="charts", model="openai/vision", instructions=INSTRUCTIONS, tools=[render_chart]
                )
            ],
            models=ModelRegistry(
                providers={"openai": OpenAIProvider(api_key="test", base_url=server.url + "/v1").model}
            ),
        )
        chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
        async with build_worker(client, app, task_queue=task_queue, artifacts=store):
            dispatched = await chamvi.dispatch(
                "charts", "is this week fine?", attachments=[Attachment(PNG, "last-week.png")]
            )
            run = await chamvi.wait(dispatched.run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    run_id = dispatched.run_id
    first, second = server.requests
    system, example, answer, trigger = first.messages
    assert system == {"role": "system", "content": "You read charts."}
    assert example == {
        "role": "user",
        "content": [
            {"type": "text", "text": "A chart that looks fine:"},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/png;base64,{b64(EXAMPLE)}", "detail": "low"},
            },
        ],
        "name": "example",
    }
    assert answer == {"role": "assistant", "content": "Fine: no dip."}
    # the attachment goes with the run's trigger, not with the instructions' user message
    assert trigger["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{b64(PNG)}"},
    }
    assert second.messages[:4] == first.messages
    calling, result, files = second.messages[4:]
    assert calling["tool_calls"][0]["function"]["name"] == "render_chart"
    assert result == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "This week's chart:\n[chart.png (image/png): attached below]",
    }
    assert files == {
        "role": "user",
        "content": [
            {"type": "text", "text": "Files of the result of tool call call_1:"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(CHART)}"}},
        ],
    }

    [step] = [s for s in run.steps if s.kind == "tool"]
    chart = await store.info(f"{run_id}.0001")
    assert step.output == ["This week's chart:", artifact_file_part(chart).model_dump(mode="json")]
    history = await payloads(client, run_id)
    assert f"{run_id}.0001" in history
    for data in (PNG, CHART, EXAMPLE):  # no bytes, base64 of any alphabet, in history
        assert b64(data)[:20] not in history
        assert base64.urlsafe_b64encode(data).decode()[:20] not in history
    assert "A chart that looks fine" not in history  # configured messages stay out of the run


async def test_a_tool_handing_over_an_artifact_the_store_lacks_fails_the_run_with_artifact_not_found(
    client: Client, task_queue: str
) -> None:
    @tool
    async def ghost(ctx: ToolContext) -> FilePart:
        """Hands over a file that was never stored."""
        missing = Artifact(
            id=f"{ctx.run.run_id}.0009",
            run_id=ctx.run.run_id,
            media_type="application/pdf",
            size=1,
            sha256="0",
        )
        return artifact_file_part(missing)

    models = ModelRegistry()
    model = ScriptedModel([call("ghost"), reply("never")])
    models.register("scripted/ghost", model)
    app = App(
        agents=[define_agent(name="ghost", model="scripted/ghost", instructions="x", tools=[ghost])],
        models=models,
    )
    chamvi = ChamviClient(client, task_queue=task_queue)
    async with build_worker(client, app, task_queue=task_queue):
        run = await chamvi.wait((await chamvi.dispatch("ghost")).run_id)

    assert run.status == RunStatus.FAILED
    assert run.error is not None and run.error.code == "artifact_not_found"
    assert f"{run.run_id}.0009" in run.error.message
    assert len(model.requests) == 1  # the second model call never reached the model


def test_the_readmes_instructions_as_messages_define_an_agent_with_an_example_image(tmp_path: Path) -> None:
    reviewer = python_module("guides/agents.md", "reviewer.py", tmp_path).reviewer

    system, example, answer = reviewer.instructions
    assert (system.role, answer.content) == ("system", "Fine: no dip.")
    [image] = example.media
    assert isinstance(image, ImagePart) and image.provider_options == {"openai": {"detail": "low"}}


PDF = b"%PDF-1.4 the terms"


async def test_parts_reach_the_messages_api_as_image_and_document_blocks(
    client: Client, task_queue: str, tmp_path: Path
) -> None:
    store = ArtifactStore.local(tmp_path / "artifacts")
    instructions = [
        *INSTRUCTIONS[:1],
        Message(
            role="user",
            parts=[
                *INSTRUCTIONS[1].parts,
                FilePart(media_type="application/pdf", data=PDF, filename="terms.pdf"),
            ],
        ),
        *INSTRUCTIONS[2:],
    ]
    with AnthropicServer() as server:
        server.add(claude_tool_use("render_chart", {}, call_id="toolu_1"), claude_text("A dip on Tuesday."))
        app = App(
            agents=[
                define_agent(
                    name="charts",
                    model="anthropic/claude-test",
                    instructions=instructions,
                    tools=[render_chart],
                )
            ],
            models=[AnthropicProvider(api_key="test", base_url=server.url)],
        )
        chamvi = ChamviClient(client, task_queue=task_queue, artifacts=store)
        async with build_worker(client, app, task_queue=task_queue, artifacts=store):
            dispatched = await chamvi.dispatch(
                "charts",
                "is this week fine?",
                attachments=[Attachment(PNG, "last-week.png"), Attachment(b"# Notes", "notes.md")],
            )
            run = await chamvi.wait(dispatched.run_id)

    assert run.status == RunStatus.COMPLETED, run.error
    first, second = server.requests
    assert first.body["system"] == [{"type": "text", "text": "You read charts."}]
    example, answer, trigger = first.messages
    # the "openai" provider options are another provider's: they stay off this wire
    assert example == {
        "role": "user",
        "content": [
            {"type": "text", "text": "A chart that looks fine:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(EXAMPLE)}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": b64(PDF)},
                "title": "terms.pdf",
            },
        ],
    }
    assert answer == {"role": "assistant", "content": [{"type": "text", "text": "Fine: no dip."}]}
    # the attachments go with the run's trigger, as they do to OpenAI's
    assert trigger["content"][1:] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": b64(PNG)}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "# Notes"},
            "title": "notes.md",
        },
    ]
    assert second.messages[:3] == first.messages
    calling, result = second.messages[3:]
    assert calling["content"] == [{"type": "tool_use", "id": "toolu_1", "name": "render_chart", "input": {}}]
    [tool_result] = result["content"]
    assert tool_result["tool_use_id"] == "toolu_1"
    assert tool_result["content"][0]["text"].startswith("This week's chart:")
    assert tool_result["content"][1] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": b64(CHART)},
    }
    history = await payloads(client, dispatched.run_id)
    for data in (PNG, CHART, EXAMPLE, PDF):
        assert b64(data)[:20] not in history
