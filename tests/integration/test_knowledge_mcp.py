"""`chamvi mcp`, driven by the official SDK's own MCP client over stdio and streamable HTTP.

The server is the real command in its own process: a wiki folder it opens itself, and two
collections served by a worker (with its own Qdrant) that it searches through Temporal only.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.session import ClientRequestContext
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ElicitRequestParams, ElicitResult, ErrorData, TextContent
from temporalio.client import Client as TemporalClient

from chamvi import App, define_agent
from chamvi._dev import write_stack
from chamvi.cli import cli
from chamvi.knowledge import folder, knowledge_collection, knowledge_tools
from chamvi.knowledge.search import MAX_TOP_K
from chamvi.knowledge_store import FileKnowledgeStore
from chamvi.mcp.knowledge import package_version
from tests.knowledge_helpers import knowledge_worker, new_store, wait_for_passes
from tests.polling import SLOW_PATIENCE_SECONDS, SLOW_TEST_TIMEOUT, eventually
from tests.support.npm import npm_bin

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(SLOW_TEST_TIMEOUT)  # most tests start `chamvi mcp` in a fresh process
READING_TOOLS = {"knowledge_read", "knowledge_index", "knowledge_search", "knowledge_check"}
WIKI_TOOLS = READING_TOOLS | {
    "knowledge_create",
    "knowledge_edit",
    "knowledge_rewrite",
    "knowledge_supersede",
    "knowledge_log",
}
WRITER = "writer-secret"
READER = "reader-secret"
OUTSIDER = "outsider-secret"
TOKENS = json.dumps(
    [
        {"value": WRITER, "id": "writer", "permissions": ["knowledge:*"]},
        {"value": READER, "id": "reader", "permissions": ["knowledge:read"]},
        {"value": OUTSIDER, "id": "outsider", "permissions": ["runs:read"]},
    ]
)
NEW_PAGE = {
    "type": "concept",
    "slug": "exchanges",
    "title": "Exchanges",
    "content": "See [refunds](concept/refunds).",
}


@dataclass
class Served:
    """Two indexed collections on this test's task queue, and a wiki folder with two pages."""

    handbook: str
    releases: str
    wiki: Path
    argv: list[str]
    """The Temporal options of this test (address, namespace, task queue)."""

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "chamvi.cli", "mcp", *args, *self.argv]


@pytest.fixture
async def served(client: TemporalClient, task_queue: str, tmp_path: Path) -> AsyncIterator[Served]:
    suffix = uuid.uuid4().hex[:8]
    handbook, releases = f"handbook-{suffix}", f"releases-{suffix}"
    (tmp_path / "handbook").mkdir()
    (tmp_path / "handbook" / "refunds.md").write_text("# Refunds\n\nRefunds are paid within 14 days.\n")
    (tmp_path / "handbook" / "shipping.md").write_text(
        "# Shipping\n\nWe ship worldwide with tracked parcels.\n"
    )
    (tmp_path / "releases").mkdir()
    (tmp_path / "releases" / "v2.md").write_text("# Version 2\n\nRefunds can now be asked for in the app.\n")
    wiki = FileKnowledgeStore(tmp_path / "wiki")
    await wiki.create("concept", "refunds", "Refunds", "Refunds are paid within 14 days of the return.")
    await wiki.create("concept", "returns", "Returns", "Returns are free within 30 days.")
    reader = define_agent(
        name="reader",
        model="local/demo",
        instructions="Read.",
        tools=knowledge_tools(collections=[handbook, releases]),
    )
    app = App(
        agents=[reader],
        collections=[
            knowledge_collection(handbook, model="test/hash-64", sources=[folder(tmp_path / "handbook")]),
            knowledge_collection(releases, model="test/hash-64", sources=[folder(tmp_path / "releases")]),
        ],
    )
    argv = [
        "--address",
        client.service_client.config.target_host,
        "--namespace",
        client.namespace,
        "--task-queue",
        task_queue,
    ]
    async with knowledge_worker(client, app, new_store(), task_queue):
        await wait_for_passes(client, handbook, 1)
        await wait_for_passes(client, releases, 1)
        yield Served(handbook, releases, wiki.directory, argv)


def text(result: CallToolResult) -> str:
    return "".join(block.text for block in result.content if isinstance(block, TextContent))


@asynccontextmanager
async def stdio(served: Served, *args: str) -> AsyncIterator[Client]:
    """``chamvi mcp ARGS`` started by the SDK's stdio client, as a host would start it."""
    program, *rest = served.command(*args)
    params = StdioServerParameters(command=program, args=rest, env=dict(os.environ), cwd=str(ROOT))
    async with Client(params, cache=None) as client:
        yield client


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@asynccontextmanager
async def serving(served: Served, *args: str) -> AsyncIterator[str]:
    """``chamvi mcp --transport http ARGS`` in its own process, with this module's tokens; yields its URL."""
    port = _free_port()
    log = (served.wiki.parent / f"mcp-{port}.log").open("ab")
    process = subprocess.Popen(
        served.command("--transport", "http", "--port", str(port), *args),
        cwd=ROOT,
        env={**os.environ, "CHAMVI_TOKENS": TOKENS},
        stdout=subprocess.DEVNULL,
        stderr=log,
    )

    async def accepting() -> bool | None:
        if process.poll() is not None:
            raise AssertionError(f"`chamvi mcp` exited with {process.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            return None
        writer.close()
        return True

    try:
        await eventually(accepting, f"`chamvi mcp` on port {port}", seconds=SLOW_PATIENCE_SECONDS)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait()
        log.close()


@asynccontextmanager
async def http(
    served: Served, *args: str, answer: str | None = None, token: str | None = WRITER
) -> AsyncIterator[Client]:
    """``chamvi mcp --transport http ARGS`` in its own process, reached by the SDK's HTTP client.

    ``answer`` is what the person at the client answers when asked (``accept``: yes, retire it);
    ``token`` is the bearer token the client sends.
    """

    async def person(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        assert params.message.startswith("Retire knowledge page ")
        if answer == "accept":
            return ElicitResult(action="accept", content={"retire": True})
        return ElicitResult(action="decline")

    async with serving(served, *args) as url, connected(url, token, person if answer else None) as client:
        yield client


@asynccontextmanager
async def connected(url: str, token: str | None, elicitation: Any = None) -> AsyncIterator[Client]:
    """The SDK's streamable HTTP client at ``url``, sending ``token`` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http_client:
        transport = streamable_http_client(url, http_client=http_client)
        async with Client(transport, cache=None, elicitation_callback=elicitation) as client:
            yield client


async def test_stdio_serves_the_wiki_tools_and_a_search_over_the_chosen_collections(served: Served) -> None:
    wiki = ["--kb", str(served.wiki), "--prefix", "wiki", "--write"]
    async with stdio(served, *wiki, "--collection", served.handbook) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        page = await client.call_tool("wiki_read", {"id": "concept/refunds"})
        hits = await client.call_tool("wiki_search", {"query": "refunds"})
        found = await client.call_tool("knowledge_search", {"query": "refunds paid within 14 days"})
        created = await client.call_tool(
            "wiki_create",
            {
                "type": "concept",
                "slug": "exchanges",
                "title": "Exchanges",
                "content": "See [refunds](concept/refunds).",
            },
        )
    assert set(listed) == {name.replace("knowledge_", "wiki_") for name in WIKI_TOOLS} | {"knowledge_search"}
    assert "# Refunds" in text(page) and not page.is_error
    assert [hit["id"] for hit in hits.structured_content["result"]][:1] == ["concept/refunds"]
    assert [m["document"] for m in found.structured_content["matches"]][:1] == ["refunds.md"]
    assert found.structured_content["matches"][0]["collection"] == served.handbook
    assert text(created) == "Created concept/exchanges."
    assert (await FileKnowledgeStore(served.wiki).read("concept/exchanges")) is not None


async def test_knowledge_search_over_two_collections_ranks_across_both_and_refuses_a_third(
    served: Served,
) -> None:
    async with stdio(served, "--collection", served.handbook, "--collection", served.releases) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        both = await client.call_tool("knowledge_search", {"query": "refunds", "top_k": 3})
        one = await client.call_tool("knowledge_search", {"query": "refunds", "collection": served.releases})
        refused = await client.call_tool("knowledge_search", {"query": "refunds", "collection": "secret"})
    assert listed == ["knowledge_search"]
    matches = both.structured_content["matches"]
    assert {m["collection"] for m in matches} == {served.handbook, served.releases}
    assert [m["score"] for m in matches] == sorted((m["score"] for m in matches), reverse=True)
    assert {m["collection"] for m in one.structured_content["matches"]} == {served.releases}
    assert refused.is_error
    assert f"collection 'secret' is not searchable here: this server searches '{served.handbook}', " in text(
        refused
    )


async def test_streamable_http_serves_retire_when_interactive_and_asks_the_person_first(
    served: Served,
) -> None:
    async with http(served, "--kb", str(served.wiki), "--write", "--interactive", answer="decline") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        declined = await client.call_tool("knowledge_retire", {"id": "concept/returns", "reason": "Wrong."})
    kept = await FileKnowledgeStore(served.wiki).read("concept/returns")
    async with http(served, "--kb", str(served.wiki), "--write", "--interactive", answer="accept") as client:
        retired = await client.call_tool("knowledge_retire", {"id": "concept/returns", "reason": "Wrong."})
        again = await client.call_tool("knowledge_retire", {"id": "concept/returns", "reason": "Wrong."})
    page = await FileKnowledgeStore(served.wiki).read("concept/returns")
    assert listed == WIKI_TOOLS | {"knowledge_retire"}
    assert text(declined) == "Not retired: a person declined. The page stays as it is."
    assert kept is not None and kept.status != "retired"
    assert text(retired) == "Retired concept/returns."
    assert page is not None and page.status == "retired"
    assert again.is_error and "page 'concept/returns' is already retired" in text(again)


async def test_streamable_http_without_interactive_has_no_retire_and_a_client_that_cannot_ask_retires_nothing(
    served: Served,
) -> None:
    async with http(served, "--kb", str(served.wiki), "--write") as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        missing = await client.call_tool("knowledge_read", {"id": "concept/nowhere"})
    async with http(served, "--kb", str(served.wiki), "--write", "--interactive") as client:
        with pytest.raises(MCPError, match="did not declare the form elicitation capability"):
            await client.call_tool("knowledge_retire", {"id": "concept/returns", "reason": "Wrong."})
    page = await FileKnowledgeStore(served.wiki).read("concept/returns")
    assert listed == WIKI_TOOLS
    assert missing.is_error and "page 'concept/nowhere' does not exist" in text(missing)
    assert page is not None and page.status != "retired"


async def test_streamable_http_refuses_a_request_without_a_token_or_with_one_that_cannot_read(
    served: Served,
) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with serving(served, "--kb", str(served.wiki), "--write") as url, httpx.AsyncClient() as raw:
        missing = await raw.post(url, json=initialize, headers=accept)
        unknown = await raw.post(url, json=initialize, headers={**accept, "Authorization": "Bearer guessed"})
        outsider = await raw.post(
            url, json=initialize, headers={**accept, "Authorization": f"Bearer {OUTSIDER}"}
        )
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert missing.json()["error"]["code"] == "unauthorized"
    assert unknown.status_code == 401 and unknown.json()["error"]["message"] == "unknown bearer token"
    assert outsider.status_code == 403
    assert outsider.json()["error"]["message"] == (
        "token 'outsider' lacks the permission 'knowledge:read' this server needs"
    )


async def test_streamable_http_serves_no_write_tool_unless_asked_for(served: Served) -> None:
    async with http(served, "--kb", str(served.wiki)) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        created = await client.call_tool("knowledge_create", NEW_PAGE)
    assert listed == READING_TOOLS
    assert created.is_error
    assert await FileKnowledgeStore(served.wiki).read("concept/exchanges") is None


async def test_a_token_that_can_only_read_neither_sees_nor_calls_the_write_tools(served: Served) -> None:
    async with serving(served, "--kb", str(served.wiki), "--write") as url:
        async with connected(url, READER) as client:
            seen_by_reader = {tool.name for tool in (await client.list_tools()).tools}
            page = await client.call_tool("knowledge_read", {"id": "concept/refunds"})
            refused = await client.call_tool("knowledge_create", NEW_PAGE)
        unwritten = await FileKnowledgeStore(served.wiki).read("concept/exchanges")
        async with connected(url, WRITER) as client:
            seen_by_writer = {tool.name for tool in (await client.list_tools()).tools}
            created = await client.call_tool("knowledge_create", NEW_PAGE)
    assert seen_by_reader == READING_TOOLS
    assert "# Refunds" in text(page)
    assert refused.is_error
    assert text(refused).endswith("token 'reader' lacks the permission 'knowledge:write' this tool needs")
    assert unwritten is None
    assert seen_by_writer == WIKI_TOOLS
    assert text(created) == "Created concept/exchanges."


async def test_a_foreign_host_header_is_refused_so_a_rebound_dns_name_reaches_nothing(served: Served) -> None:
    async with serving(served, "--kb", str(served.wiki)) as url, httpx.AsyncClient() as raw:
        foreign = await raw.post(
            url,
            json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
            headers={"Host": "attacker.example", "Authorization": f"Bearer {READER}"},
        )
    assert foreign.status_code == 421


async def test_a_non_loopback_address_serves_the_hosts_it_names_and_no_other(served: Served) -> None:
    args = ("--kb", str(served.wiki), "--host", "0.0.0.0", "--allowed-host", "wiki.internal")
    async with serving(served, *args) as url, httpx.AsyncClient() as raw:
        port = url.split(":")[2].split("/")[0]
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        auth = {"Authorization": f"Bearer {READER}", "Accept": "application/json, text/event-stream"}
        named = await raw.post(url, json=ping, headers={**auth, "Host": f"wiki.internal:{port}"})
        loopback = await raw.post(url, json=ping, headers=auth)
    assert named.status_code != 421
    assert loopback.status_code == 421


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            [],
            "Error: nothing to serve: give --kb DIR (a wiki's tools), --collection NAME "
            "(knowledge_search), or both",
        ),
        (
            ["--collection", "handbook", "--interactive"],
            "Error: --interactive serves knowledge_retire, a wiki tool: give --kb DIR too",
        ),
        (
            ["--kb", "no/such/folder"],
            "Error: no knowledge base at 'no/such/folder': the folder does not exist",
        ),
        (
            ["--kb", ".", "--interactive"],
            "Error: --interactive serves knowledge_retire, a write tool: give --write too",
        ),
        (
            ["--kb", ".", "--transport", "http", "--host", "0.0.0.0"],
            "Error: --host '0.0.0.0' is not a loopback address: name the host names clients reach this "
            "server by with --allowed-host (repeatable), so a foreign Host header is refused",
        ),
        (
            ["--kb", ".", "--transport", "http"],
            "Error: CHAMVI_TOKENS is not set: the HTTP transport takes the HTTP API's bearer tokens "
            "(knowledge:read to read, knowledge:write to write), e.g. export "
            'CHAMVI_TOKENS=\'[{"value": "<secret>", "id": "assistant", "permissions": ["knowledge:read"]}]\'',
        ),
    ],
    ids=[
        "nothing",
        "interactive-without-kb",
        "missing-folder",
        "interactive-without-write",
        "open-host",
        "no-tokens",
    ],
)
def test_bad_options_are_one_line_naming_the_problem(args: list[str], expected: str) -> None:
    result = CliRunner(env={"CHAMVI_TOKENS": ""}).invoke(cli, ["mcp", *args])
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [expected]


async def test_a_wiki_and_collections_under_one_search_name_are_refused(served: Served) -> None:
    argv = ["mcp", "--kb", str(served.wiki), "--collection", served.handbook, *served.argv]
    result = await asyncio.to_thread(CliRunner().invoke, cli, argv)
    assert result.exit_code == 1
    assert result.output.strip().splitlines() == [
        "Error: knowledge_server: the wiki's knowledge_search would hide the collections' one: give the "
        "wiki's tools another prefix (e.g. prefix='wiki')"
    ]


async def test_a_collection_no_worker_serves_is_refused_at_the_start(served: Served) -> None:
    result = await asyncio.to_thread(
        CliRunner().invoke, cli, ["mcp", "--collection", "handbok", *served.argv]
    )
    assert result.exit_code == 1
    assert result.output.strip().startswith("Error: unknown collection 'handbok': known collections are ")


async def test_the_sdk_client_reads_the_tools_annotations_argument_descriptions_bounds_and_version(
    served: Served,
) -> None:
    wiki = ["--kb", str(served.wiki), "--prefix", "wiki", "--write", "--top-k", "7"]
    async with stdio(served, *wiki, "--collection", served.handbook) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        info = client.server_info
    assert info is not None and info.name == "knowledge" and info.version == package_version()
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint)
        for name, t in listed.items()
        if t.annotations is not None
    }
    assert hints == {
        "wiki_read": (True, None),
        "wiki_index": (True, None),
        "wiki_search": (True, None),
        "wiki_check": (True, None),
        "knowledge_search": (True, None),
        "wiki_create": (False, False),
        "wiki_log": (False, False),
        "wiki_edit": (False, True),
        "wiki_rewrite": (False, True),
        "wiki_supersede": (False, True),
    }
    assert all(t.annotations is not None and t.annotations.open_world_hint is False for t in listed.values())
    top_k = listed["knowledge_search"].input_schema["properties"]["top_k"]
    assert (top_k["minimum"], top_k["maximum"], top_k["default"]) == (1, MAX_TOP_K, 7)
    assert top_k["description"]
    limit = listed["wiki_search"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"]) == (1, 50)
    for tool in listed.values():
        for name, spec in tool.input_schema.get("properties", {}).items():
            assert spec.get("description"), f"{tool.name}.{name} has no description"


async def test_the_mcp_inspector_cli_lists_chamvi_mcps_tools_with_their_annotations(served: Served) -> None:
    inspector = npm_bin("mcp-inspector")
    wiki = ["--kb", str(served.wiki), "--interactive", "--write"]  # no collection: no Temporal needed
    command = [inspector, "--cli", sys.executable, "-m", "chamvi.cli", "mcp", *wiki]
    done = await asyncio.to_thread(
        subprocess.run,
        [*command, "--method", "tools/list"],
        capture_output=True,
        text=True,
        timeout=SLOW_PATIENCE_SECONDS,  # node starts the Inspector, which starts `chamvi mcp`
        cwd=ROOT,
        env={**os.environ},
    )
    assert done.returncode == 0, done.stderr
    tools = {t["name"]: t for t in json.loads(done.stdout)["tools"]}
    assert tools["knowledge_retire"]["annotations"]["destructiveHint"] is True
    assert tools["knowledge_read"]["annotations"] == {"readOnlyHint": True, "openWorldHint": False}
    assert tools["knowledge_search"]["inputSchema"]["properties"]["limit"]["maximum"] == 50


async def test_chamvi_mcp_finds_the_chamvi_dev_stack_on_its_data_folder_without_temporal_address(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    address, namespace, task_queue = served.argv[1], served.argv[3], served.argv[5]
    data = tmp_path / "data"
    data.mkdir()
    write_stack(data, address, namespace, task_queue)
    monkeypatch.delenv("TEMPORAL_ADDRESS", raising=False)
    program = [sys.executable, "-m", "chamvi.cli", "mcp", "--collection", served.handbook]
    program += ["--data", str(data)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHAMVI_"))}
    params = StdioServerParameters(command=program[0], args=program[1:], env=env, cwd=str(tmp_path))
    async with Client(params, cache=None) as client:
        found = await client.call_tool("knowledge_search", {"query": "refunds paid within 14 days"})
    assert not found.is_error, text(found)
    assert found.structured_content["matches"][0]["collection"] == served.handbook
