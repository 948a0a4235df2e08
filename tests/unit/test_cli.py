"""The command line without a server: argument errors, `check`, and how `chamvi dev` starts Temporal."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from qdrant_client import AsyncQdrantClient, QdrantClient

from chamvi._constants import SEARCH_ATTRIBUTES
from chamvi._dev import DevServerConfig, search_attribute_specs
from chamvi._lifecycle import boot_collections
from chamvi.cli import cli
from chamvi.errors import ChamviValidationError, InvalidAgentDefinitionError
from chamvi.knowledge.index import KnowledgeIndex
from chamvi.models.knowledge import CollectionMeta
from chamvi.runtime import load_app


@pytest.fixture(autouse=True)
def _data_folder_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's commands use a tmp data folder: never a `chamvi dev` running in ./.chamvi."""
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path / "chamvi-data"))


def invoke(*args: str) -> Result:
    """Runs the CLI in a thread of its own, so its ``asyncio.run`` never touches the test's loop."""
    results: list[Result] = []
    thread = threading.Thread(target=lambda: results.append(CliRunner().invoke(cli, list(args))))
    thread.start()
    thread.join(60)
    assert results, "the command did not finish within 60 s"
    return results[0]


def one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    assert lines[0].startswith("Error: ")
    return lines[0]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_bad_json_payload_fails_before_connecting() -> None:
    result = invoke("dispatch", "support", "--payload", "{not json", "--temporal-address", "127.0.0.1:1")
    assert "--payload is not valid JSON" in one_line_error(result)


@pytest.mark.parametrize("payload", ["[1, 2]", '"shipping"', "42", "null"])
def test_a_payload_that_is_not_a_json_object_is_refused(payload: str) -> None:
    result = invoke("dispatch", "support", "--payload", payload, "--address", "127.0.0.1:1")
    message = one_line_error(result)
    assert message.startswith("Error: --payload must be a JSON object")
    assert 'e.g. --payload \'{"query": "shipping"}\'' in message


def test_an_unreachable_server_names_the_address_and_the_fix() -> None:
    address = f"127.0.0.1:{free_port()}"
    message = one_line_error(invoke("runs", "list", "--address", address))
    assert message == (
        f"Error: cannot reach Temporal at {address}: start it with `chamvi dev` or set TEMPORAL_ADDRESS"
    )


def test_address_on_dispatch_is_the_temporal_address_as_on_every_command() -> None:
    address = f"127.0.0.1:{free_port()}"
    for command in (
        ("dispatch", "support"),
        ("runs", "list"),
        ("runs", "show", "run-x"),
        ("cancel", "run-x"),
    ):
        message = one_line_error(invoke(*command, "--address", address))
        assert f"cannot reach Temporal at {address}" in message, command


def test_dispatch_takes_the_channel_address_as_channel_address() -> None:
    result = invoke("dispatch", "--help")
    assert result.exit_code == 0, result.output
    assert "--channel-address TEXT" in result.output
    assert "TEMPORAL_ADDRESS" in result.output


def test_an_unknown_status_is_refused_by_the_parser() -> None:
    result = invoke("runs", "list", "--status", "sleeping")
    assert result.exit_code == 2
    assert "'sleeping' is not one of" in result.output


def test_check_refuses_an_app_reference_without_an_attribute() -> None:
    message = one_line_error(invoke("check", "--app", "examples.support.app"))
    assert "must look like 'module:attribute'" in message


def test_check_reports_a_module_that_cannot_be_imported() -> None:
    message = one_line_error(invoke("check", "--app", "examples.no_such_module:app"))
    assert "cannot import app module 'examples.no_such_module'" in message


def test_check_reports_an_attribute_that_is_not_an_app() -> None:
    message = one_line_error(invoke("check", "--app", "examples.support.app:support"))
    assert "is not a chamvi App (found Agent)" in message


def test_check_reports_a_module_that_fails_while_importing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chamvi_broken_app.py").write_text("raise RuntimeError('no database configured')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = one_line_error(invoke("check", "--app", "chamvi_broken_app:app"))
    assert message == (
        "Error: importing app 'chamvi_broken_app:app' raised RuntimeError: no database configured"
    )


def test_channels_list_shows_the_webhook_route_trust_and_subscribers_of_the_example(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CHAMVI_APP", raising=False)
    result = invoke("channels", "list")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "console  ConsoleChannel  in: none  (out, trusted)",
        "  default address: console",
        "  subscribers: support",
        "tickets  webhook  in: POST /channels/tickets/events  (no out, untrusted)",
        "  subscribers: ticket-desk (new-tickets) [filtered]",
    ]
    listed = json.loads(invoke("channels", "list", "--json").stdout)
    assert [(c["name"], c["outbound"]) for c in listed] == [("console", True), ("tickets", False)]


def test_check_of_the_example_lists_its_agents_and_warns_of_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAMVI_APP", raising=False)
    monkeypatch.delenv("CHAMVI_HANDBOOK_MODEL", raising=False)
    result = invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "examples.support.app:app: ok, 4 agent(s), 1 collection(s), channels: console, tickets",
        "  agent support: model local/demo, tools: knowledge_search, lookup_order, refund_order (effect), "
        "send_reply (effect), state_refunds_list, state_refunds_upsert (effect), "
        "state_refunds_remove (effect), skills: refund-procedure",
        "  agent librarian: model local/demo, tools: knowledge_read, knowledge_index, knowledge_search, "
        "knowledge_create (effect), knowledge_edit (effect), knowledge_rewrite (effect), "
        "knowledge_supersede (effect), knowledge_log (effect), knowledge_check, knowledge_retire (effect)",
        "  agent ticket-desk: model local/demo, tools: answer_ticket",
        "  agent digest: model local/demo, tools: count_orders, post_digest (effect)",
        "  collection handbook: model local/all-minilm-l6-v2, sources: folder examples/support/handbook",
        "  schedule daily-digest: agent digest, cron 0 8 * * * (UTC), overlap skip",
    ]
    # the example's own effect tools (and the wiki's) each find an effect that happened already
    assert result.stderr == ""


def test_check_warns_when_one_key_variable_is_sent_to_two_hosts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAMVI_APP", raising=False)
    monkeypatch.delenv("CHAMVI_HANDBOOK_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    gateway = {"gateway": {"base_url": "https://gw.example/v1", "api_key_env": "OPENAI_API_KEY"}}
    monkeypatch.setenv("CHAMVI_PROVIDERS", json.dumps(gateway))
    result = invoke("check")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "warning: OPENAI_API_KEY is sent to 2 hosts: api.openai.com (provider 'openai'), gw.example "
        "(provider 'gateway'): give each host's key a variable of its own (api_key_env in CHAMVI_PROVIDERS)"
    ]
    monkeypatch.setenv("OPENAI_BASE_URL", "https://gw.example/v1")  # the built-in goes there too
    assert invoke("check").stderr == ""


def test_check_with_no_mcp_names_the_mcp_servers_an_agent_uses_without_contacting_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "chamvi_mcp_app.py").write_text(
        "from chamvi import App, EffectSpec, define_agent, mcp_server, mcp_tools\n"
        "gh = mcp_server('github', url='http://127.0.0.1:9/mcp', effects={'create_issue': EffectSpec()})\n"
        "agent = define_agent(name='triage', model='local/demo', instructions='x',\n"
        "                     tools=mcp_tools('github'))\n"
        "app = App(agents=[agent], mcp_servers=[gh])\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = invoke("check", "--app", "chamvi_mcp_app:app", "--no-mcp")
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[1] == (
        "  agent triage: model local/demo, tools: none, the tools of MCP server github (http://127.0.0.1:9/mcp)"
    )
    assert (
        "warning: agent 'triage': effect tool 'create_issue' of MCP server 'github' has no already_applied"
        in result.stderr
    )


# an app module with one agent and the collections below it; {docs} is a folder that exists
APP_HEADER = """
from datetime import timedelta
from pathlib import Path

from chamvi import App, define_agent
from chamvi.knowledge import define_source, folder, knowledge_collection, knowledge_tools

DOCS = Path(__file__).parent / "docs"
helper = define_agent(
    name="helper",
    model="local/demo",
    instructions="Answer from the docs.",
    tools=knowledge_tools(collections=["docs"]),
)
"""


def write_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str) -> str:
    (tmp_path / "docs").mkdir(exist_ok=True)
    (tmp_path / "docs" / "a.md").write_text("# A\n\nSome text.\n")
    (tmp_path / f"{name}.py").write_text(APP_HEADER + body)
    monkeypatch.syspath_prepend(str(tmp_path))
    return f"{name}:app"


def test_check_summarises_collections_with_model_and_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    body = """
async def tickets():
    yield {"id": "T-1", "content": "The printer is on fire."}

docs = knowledge_collection("docs", model="test/hash-64", sources=[folder(DOCS)], resync=timedelta(hours=1))
inbox = knowledge_collection(
    "inbox", model="test/hash-64", sources=[define_source(kind="tickets", trusted=False, documents=tickets)]
)
app = App(agents=[helper], collections=[docs, inbox])
"""
    result = invoke("check", "--app", write_app(tmp_path, monkeypatch, "chamvi_ok_app", body))
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "chamvi_ok_app:app: ok, 1 agent(s), 2 collection(s), channels: none",
        "  agent helper: model local/demo, tools: knowledge_search",
        "  collection docs: model test/hash-64, sources: folder docs, resync every 1 h",
        "  collection inbox: model test/hash-64, sources: tickets, untrusted (a search taints the run)",
    ]


@pytest.mark.parametrize(
    ("name", "body", "expected"),
    [
        (
            "chamvi_twice_app",
            """
docs = knowledge_collection("docs", model="test/hash-64", sources=[folder(DOCS)])
app = App(agents=[helper], collections=[docs, docs])
""",
            "Error: collection 'docs' is declared twice",
        ),
        (
            "chamvi_model_app",
            """
docs = knowledge_collection("docs", model="nowhere/embedder", sources=[folder(DOCS)])
app = App(agents=[helper], collections=[docs])
""",
            "Error: collection 'docs': embedding model 'nowhere/embedder' does not resolve: known providers "
            "are 'fastembed/...', 'local/...', 'openai/...', 'test/...'",
        ),
        (
            "chamvi_folder_app",
            """
docs = knowledge_collection("docs", model="test/hash-64", sources=[folder(DOCS / "missing")])
app = App(agents=[helper], collections=[docs])
""",
            "Error: collection 'docs': folder() path '{tmp}/docs/missing' is not a directory",
        ),
        (
            "chamvi_source_check_app",
            """
def no_token():
    raise RuntimeError("TICKETS_TOKEN is not set")

async def tickets():
    yield {"id": "T-1", "content": "hello"}

docs = knowledge_collection(
    "docs", model="test/hash-64", sources=[define_source(kind="tickets", check=no_token, documents=tickets)]
)
app = App(agents=[helper], collections=[docs])
""",
            "Error: collection 'docs': source 'tickets' failed its check: TICKETS_TOKEN is not set",
        ),
    ],
    ids=["declared-twice", "model-does-not-resolve", "folder-is-no-directory", "source-check-raises"],
)
def test_check_reports_a_bad_collection_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, body: str, expected: str
) -> None:
    result = invoke("check", "--app", write_app(tmp_path, monkeypatch, name, body))
    assert one_line_error(result) == expected.format(tmp=tmp_path)


def test_dev_flags_come_from_the_search_attribute_constants(tmp_path: Path) -> None:
    assert search_attribute_specs() == [
        "ChamviAgent=Keyword",
        "ChamviStatus=Keyword",
        "ChamviChannel=Keyword",
        "ChamviTainted=Bool",
        "ChamviConversation=Keyword",
    ]
    assert len(search_attribute_specs()) == len(SEARCH_ATTRIBUTES)
    command = DevServerConfig(data=tmp_path, port=7300).command("temporal")
    assert command[:3] == ["temporal", "server", "start-dev"]
    assert command[command.index("--db-filename") + 1] == str(tmp_path / "temporal.db")
    assert command[command.index("--port") + 1] == "7300"
    assert command[command.index("--ui-port") + 1] == "8300"
    flags = [command[i + 1] for i, part in enumerate(command) if part == "--search-attribute"]
    assert flags == search_attribute_specs()


def test_dev_refuses_a_port_in_use_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("dev", "--data", str(tmp_path), "--port", str(port), "--ui-port", str(free_port()))
    message = one_line_error(result)
    assert f"port {port} is in use" in message and "--port" in message
    assert not (tmp_path / "temporal.log").exists()


def test_dev_hands_its_data_folder_to_the_app_without_writing_the_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CHAMVI_DATA", raising=False)
    before = dict(os.environ)
    with socket.socket() as busy:  # dev stops at the busy port, after it read --data and loaded the app
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = invoke("dev", "--data", str(tmp_path), "--port", str(port), "--ui-port", str(free_port()))
    assert f"port {port} is in use" in one_line_error(result)
    assert dict(os.environ) == before


def test_dev_refuses_a_data_folder_another_dev_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fcntl = pytest.importorskip("fcntl")
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    with (tmp_path / "dev.lock").open("w") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("4242")
        held.flush()
        ports = ["--port", str(free_port()), "--ui-port", str(free_port())]
        result = invoke("dev", "--data", str(tmp_path), *ports)
    assert one_line_error(result) == (
        f"Error: another `chamvi dev` (pid 4242) uses {tmp_path}: stop it or pass another --data"
    )
    assert not (tmp_path / "temporal.log").exists()


def test_dev_refuses_two_tokens_with_the_same_id_and_starts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))
    tokens = [
        {"value": "first-secret", "id": "ops", "permissions": ["*"]},
        {"value": "second-secret", "id": "ops", "permissions": ["runs:read"]},
    ]
    monkeypatch.setenv("CHAMVI_TOKENS", json.dumps(tokens))
    ports = ["--port", str(free_port()), "--ui-port", str(free_port()), "--api-port", str(free_port())]
    result = invoke("dev", "--data", str(tmp_path), *ports)
    assert one_line_error(result) == (
        "Error: CHAMVI_TOKENS[0] and CHAMVI_TOKENS[1] have the same id 'ops': give every token its own id"
    )
    assert not (tmp_path / "temporal.log").exists()


def test_worker_says_in_one_line_that_another_process_holds_the_qdrant_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path))  # the worker points the app's data here; restored after
    monkeypatch.delenv("QDRANT_URL", raising=False)
    holder = QdrantClient(path=str(tmp_path / "qdrant"))  # as a running `chamvi dev` would
    try:
        result = invoke("worker", "--data", str(tmp_path), "--address", "127.0.0.1:1")
    finally:
        holder.close()
    assert one_line_error(result) == (
        f"Error: another process (a `chamvi dev` or `chamvi worker`) uses the Qdrant folder "
        f"{tmp_path / 'qdrant'}: stop it, pass another --data, or set QDRANT_URL to a Qdrant server to run "
        "several processes"
    )


async def test_worker_refuses_a_declared_collection_held_as_managed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    qdrant = AsyncQdrantClient(path=str(tmp_path / "data" / "qdrant"))
    await KnowledgeIndex(qdrant).save_meta(CollectionMeta(name="docs", kind="managed"))
    await qdrant.close()
    body = """
docs = knowledge_collection("docs", model="test/hash-64", sources=[folder(DOCS)])
app = App(agents=[helper], collections=[docs])
"""
    ref = write_app(tmp_path, monkeypatch, "chamvi_managed_clash_app", body)
    monkeypatch.setenv("CHAMVI_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("QDRANT_URL", raising=False)
    monkeypatch.delenv("CHAMVI_QDRANT_PREFIX", raising=False)
    result = invoke("worker", "--app", ref, "--data", str(tmp_path / "data"), "--address", "127.0.0.1:1")
    assert one_line_error(result) == (
        "Error: collection 'docs' is declared in the code but exists as a managed collection: "
        "rename one of them"
    )


async def test_a_failing_knowledge_boot_is_logged_and_never_raises(caplog: pytest.LogCaptureFixture) -> None:
    class BrokenStore:
        async def all_meta(self) -> list[CollectionMeta]:
            raise ConnectionError("qdrant went away")

    app = load_app("examples.support.app:app")
    with caplog.at_level(logging.INFO, logger="chamvi._lifecycle"):
        await boot_collections(None, app, BrokenStore(), "q")  # type: ignore[arg-type]
    assert [r.getMessage() for r in caplog.records] == [
        "knowledge error: starting the collections failed: ConnectionError: qdrant went away (the worker "
        "goes on; `chamvi knowledge sync NAME` asks a collection for a pass)"
    ]


@pytest.mark.parametrize("field", ["id", "value"])
def test_chamvi_api_refuses_two_tokens_with_the_same_id_or_value_in_one_line(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokens = [
        {"value": "first-secret", "id": "ops", "permissions": ["*"]},
        {"value": "second-secret", "id": "feeder", "permissions": ["knowledge:*"]},
    ]
    tokens[1][field] = tokens[0][field]
    monkeypatch.setenv("CHAMVI_TOKENS", json.dumps(tokens))
    result = invoke("api")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: CHAMVI_TOKENS[0] and CHAMVI_TOKENS[1] have the same {field}")
    assert len(result.output.strip().splitlines()) == 1 and "first-secret" not in result.output


def test_dev_gives_managed_collections_the_offline_model_unless_one_is_chosen() -> None:
    from chamvi import App
    from chamvi.cli._serving import dev_knowledge_model
    from chamvi.settings import Settings

    assert dev_knowledge_model(Settings(), App(agents=[])) == "local/all-minilm-l6-v2"
    app = App(agents=[], embedding_model="test/hash-8")
    assert dev_knowledge_model(Settings(), app) == "test/hash-8"
    assert dev_knowledge_model(Settings(knowledge_model="openai/text-embedding-3-small"), app) == (
        "openai/text-embedding-3-small"
    )


DOCS_APP = """
docs = knowledge_collection("docs", model="test/hash-64", sources=[folder(DOCS)])
app = App(agents=[helper], collections=[docs])
"""


def _store_managed(data: Path, name: str) -> None:
    """A local-mode store under ``data`` holding ``name`` as a managed collection (as `chamvi api` makes)."""

    async def write() -> None:
        index = KnowledgeIndex(AsyncQdrantClient(path=str(data / "qdrant")))
        await index.save_meta(CollectionMeta(name=name, kind="managed"))
        await index.client.close()

    thread = threading.Thread(target=lambda: asyncio.run(write()))
    thread.start()
    thread.join(60)


def _check_over_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, managed: str, app: str) -> Result:
    """`chamvi check` of an app declaring 'docs', over a store holding ``managed`` as a managed collection."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QDRANT_URL", raising=False)
    _store_managed(tmp_path / "data", managed)
    return invoke("check", "--app", write_app(tmp_path, monkeypatch, app, DOCS_APP), "--data", "data")


def test_check_reads_the_store_and_reports_a_declared_name_it_holds_as_managed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _check_over_store(tmp_path, monkeypatch, "docs", "chamvi_taken_app")
    assert result.exit_code == 1, result.output
    assert result.stderr.splitlines() == [
        "problem: collection 'docs' is declared in the code but exists as a managed collection: "
        "rename one of them",
        "Error: chamvi_taken_app:app: 1 problem(s)",
    ]


def test_check_passes_over_a_store_whose_managed_collections_the_app_does_not_declare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    result = _check_over_store(tmp_path, monkeypatch, "tickets", "chamvi_free_app")
    assert result.exit_code == 0, result.output
    assert result.stderr == ""


def test_check_warns_that_a_store_folder_a_running_worker_holds_was_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QDRANT_URL", raising=False)
    holder = QdrantClient(path=str(tmp_path / "data" / "qdrant"))  # as a running `chamvi worker` would
    try:
        result = invoke(
            "check", "--app", write_app(tmp_path, monkeypatch, "chamvi_held_app", DOCS_APP), "--data", "data"
        )
    finally:
        holder.close()
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("warning: the knowledge store was not read: another process")


def test_managed_routes_come_from_the_app_then_the_environment_then_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from chamvi import App
    from chamvi.cli._serving import managed_routes
    from chamvi.knowledge.collections import ManagedRoutes
    from chamvi.settings import Settings

    app = App(agents=[], managed=ManagedRoutes(base_path="/kb", max_body_bytes=8192))
    assert managed_routes(App(agents=[]), Settings()) == ManagedRoutes()
    assert managed_routes(app, Settings()) == ManagedRoutes(True, "/kb", 8192)
    env = Settings.from_env(
        {
            "CHAMVI_KNOWLEDGE_ROUTES": "false",
            "CHAMVI_KNOWLEDGE_BASE_PATH": "/docs-kb",
            "CHAMVI_KNOWLEDGE_BODY_LIMIT": "4194304",
        }
    )
    assert managed_routes(app, env) == ManagedRoutes(False, "/docs-kb", 4_194_304)
    flag = env.with_overrides(knowledge_routes=True, knowledge_base_path="/wiki")
    assert managed_routes(app, flag) == ManagedRoutes(True, "/wiki", 4_194_304)
    with pytest.raises(ChamviValidationError, match="CHAMVI_KNOWLEDGE_BODY_LIMIT='lots'"):
        Settings.from_env({"CHAMVI_KNOWLEDGE_BODY_LIMIT": "lots"})
    with pytest.raises(ChamviValidationError, match="CHAMVI_KNOWLEDGE_ROUTES='perhaps'"):
        Settings.from_env({"CHAMVI_KNOWLEDGE_ROUTES": "perhaps"})


@pytest.mark.parametrize(
    ("routes", "problem"),
    [
        ({"base_path": "kb"}, "base_path 'kb' must be '' or start with '/'"),
        ({"base_path": "/kb/"}, "must be '' or start with '/' and not end with '/'"),
        ({"base_path": "/runs/kb"}, "base_path '/runs/kb' is below /runs, which the API serves itself"),
        ({"max_body_bytes": 0}, "max_body_bytes must be a positive number of bytes, not 0"),
    ],
)
def test_managed_routes_refuse_a_base_path_or_body_limit_they_cannot_take(
    routes: dict[str, object], problem: str
) -> None:
    from chamvi.knowledge.collections import ManagedRoutes

    with pytest.raises(InvalidAgentDefinitionError, match=re.escape(problem)):
        ManagedRoutes(**routes)  # type: ignore[arg-type]


def test_chamvi_api_refuses_a_bad_knowledge_base_path_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    tokens = [{"value": "s3cret-value", "id": "ops", "permissions": ["*"]}]
    monkeypatch.setenv("CHAMVI_TOKENS", json.dumps(tokens))
    monkeypatch.setenv("QDRANT_URL", "http://127.0.0.1:1")
    result = invoke("api", "--knowledge-base-path", "/schedules")
    assert one_line_error(result) == (
        "Error: managed routes: base_path '/schedules' is below /schedules, which the API serves itself: "
        "choose another, e.g. '/knowledge'"
    )


def test_check_refuses_an_unknown_local_model_naming_the_ones_there_are(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = """
typo = define_agent(name="typo", model="local/demoo", instructions="Hi.")
app = App(agents=[typo])
"""
    result = invoke("check", "--app", write_app(tmp_path, monkeypatch, "chamvi_typo_model_app", body))
    assert one_line_error(result) == (
        "Error: agent 'typo': unknown local model 'local/demoo': the local provider has 'local/demo'"
    )
