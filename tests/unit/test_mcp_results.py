"""An MCP tool's result as history keeps it: texts, and image and file parts referencing artifacts."""

from __future__ import annotations

import base64
import json
from types import SimpleNamespace
from typing import Any, cast

from mcp.types import (
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)

from chamvi.artifacts import ArtifactStore, RunArtifacts
from chamvi.mcp import mcp_server
from chamvi.mcp._client import _output
from chamvi.models import FilePart, ImagePart, TextPart, tool_output_parts
from chamvi.tools import ToolContext

SERVER = mcp_server("media", command=["media-server"])


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


async def _result(result: CallToolResult) -> tuple[Any, RunArtifacts]:
    artifacts = RunArtifacts(ArtifactStore.memory(), "r", 2)
    ctx = cast(ToolContext, SimpleNamespace(artifacts=artifacts))
    return await _output(SERVER, "shoot", result, ctx), artifacts


async def test_images_audio_and_embedded_files_become_parts_over_the_runs_artifacts() -> None:
    result = CallToolResult(
        content=[
            TextContent(type="text", text="The shot:"),
            ImageContent(type="image", data=_b64(b"\x89PNG"), mime_type="image/png"),
            AudioContent(type="audio", data=_b64(b"RIFF"), mime_type="audio/wav"),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///reports/q3.pdf", blob=_b64(b"%PDF"), mime_type="application/pdf; version=1.7"
                ),
            ),
        ],
        structured_content={"frames": 3, "camera": "front"},
    )
    output, artifacts = await _result(result)

    parts = tool_output_parts(output)  # what the workflow gives the model
    assert parts is not None
    text, image, audio, pdf, structured = parts
    assert text == TextPart(text="The shot:")
    assert isinstance(image, ImagePart) and image.artifact is not None and image.artifact.id == "r.0002"
    assert isinstance(audio, FilePart) and audio.media_type == "audio/wav"
    assert isinstance(pdf, FilePart) and (pdf.media_type, pdf.filename) == ("application/pdf", "q3.pdf")
    assert isinstance(structured, TextPart) and json.loads(structured.text) == {
        "frames": 3,
        "camera": "front",
    }
    assert [a.id for a in artifacts.new] == ["r.0002", "r.0003", "r.0004"]
    assert await artifacts.store.read("r.0004") == b"%PDF"
    assert _b64(b"\x89PNG") not in json.dumps(output)  # references only, never the bytes


async def test_text_and_resource_links_stay_one_text() -> None:
    link = ResourceLink(type="resource_link", uri="https://example.com/doc", name="doc")
    output, artifacts = await _result(CallToolResult(content=[TextContent(type="text", text="See:"), link]))
    assert isinstance(output, str) and output.startswith("See:\n")
    assert json.loads(output.split("\n", 1)[1])["uri"] == "https://example.com/doc"
    assert artifacts.new == []
