"""``knowledge_server``: the knowledge tools served to other agents over MCP (``chamvi mcp``).

The knowledge seed's ``createKnowledgeServer``: another agent (a desktop assistant, an IDE, an agent
on another framework) reaches a wiki and the knowledge collections through the official ``mcp``
SDK, over stdio or streamable HTTP. The tools are the ones chamvi's own agents get, with the same
names, descriptions and input schemas (``knowledge_store_tools`` and ``knowledge_tools`` build them):

- the wiki's tools over a :class:`~chamvi.knowledge_store.KnowledgeStore` (``knowledge_read``,
  ``_index``, ``_search``, ``_create``, ``_edit``, ``_rewrite``, ``_supersede``, ``_log``, ``_check``);
- the tools that write (``_create``, ``_edit``, ``_rewrite``, ``_supersede``, ``_log``) only when
  ``write``: by default the server only reads;
- ``knowledge_retire`` only when ``interactive`` (and ``write``): it asks the person at the MCP client
  first (MCP elicitation), and retires nothing when the client cannot ask anyone;
- ``knowledge_search`` over the chosen collections, through each collection workflow's ``search``
  update (:class:`~chamvi.knowledge.remote.CollectionSearch`): the worker that holds Qdrant searches,
  so this server opens no index and runs beside a worker on the embedded store.

Every tool is published with its annotations (the readers ``readOnlyHint``; ``_edit``,
``_rewrite``, ``_supersede`` and ``_retire`` ``destructiveHint``; none reaches outside the wiki and
its collections: ``openWorldHint: false``), a description of each argument and JSON Schema bounds
(``top_k``, ``limit``), and the server names itself with the package's version.

Outside a run there is no durable approval and no effect ledger: a call runs once, as the MCP client
makes it. Errors a tool raises on purpose reach the client as tool errors with their message.

Over HTTP (:func:`knowledge_http_app`) the server takes the HTTP API's bearer tokens: every request
needs ``knowledge:read``, and a token without ``knowledge:write`` neither lists nor calls the write
tools. The ``Host`` header is checked against the hosts the server is reached by (DNS rebinding).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import Tool as MCPTool
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field
from starlette.types import ASGIApp, Receive, Scope, Send

from chamvi.errors import (
    ChamviError,
    ChamviValidationError,
    InvalidAgentDefinitionError,
    InvalidPageError,
    McpHostNotAllowedError,
    PageNotFoundError,
    PageStatusError,
)
from chamvi.http.auth import Authenticator, Token, authorize, bearer_credentials
from chamvi.knowledge.remote import CollectionSearch
from chamvi.knowledge.search import MAX_TOP_K, knowledge_tools
from chamvi.knowledge_store._types import RETIRED
from chamvi.knowledge_store.protocol import KnowledgeStore
from chamvi.knowledge_store.tools import MAX_SEARCH_LIMIT, knowledge_store_tools
from chamvi.permissions import has_permission
from chamvi.tools import Tool

SERVER_NAME = "knowledge"
"""The seed's name for the server, so hosts that label tools by server recognise its tools."""
SEARCH = "knowledge_search"
READ_PERMISSION = "knowledge:read"
"""What every request over HTTP needs."""
WRITE_PERMISSION = "knowledge:write"
"""What a token needs over HTTP to list and call the tools that write."""
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")

_CALLER: ContextVar[Token | None] = ContextVar("chamvi_mcp_caller", default=None)
"""The token of the HTTP request being served; None over stdio (the person who started the server).
The SDK runs each request's handler in the context of the HTTP request that carried it."""


READS = ToolAnnotations(read_only_hint=True, open_world_hint=False)
"""The annotations of the tools that only read: the wiki's ``_read`` ... and ``knowledge_search``."""


def _writer(*, destructive: bool, idempotent: bool) -> ToolAnnotations:
    return ToolAnnotations(
        read_only_hint=False, destructive_hint=destructive, idempotent_hint=idempotent, open_world_hint=False
    )


WRITES: dict[str, ToolAnnotations] = {
    "create": _writer(destructive=False, idempotent=False),
    "edit": _writer(destructive=True, idempotent=False),
    "rewrite": _writer(destructive=True, idempotent=True),
    "supersede": _writer(destructive=True, idempotent=True),
    "log": _writer(destructive=False, idempotent=False),
    "retire": _writer(destructive=True, idempotent=True),
}
"""The annotations of the wiki's tools that write, by the name after the prefix."""

ARGUMENTS: dict[str, dict[str, Any]] = {
    "id": {"description": "The page's id, <type>/<slug> ('concept/refunds'); the index lists every page."},
    "query": {"description": "What to look for, in words."},
    "limit": {"description": "The most pages to return.", "minimum": 1, "maximum": MAX_SEARCH_LIMIT},
    "type": {"description": "The page's type (one of the types the tool's description lists)."},
    "slug": {"description": "The last part of the page's id: lowercase words joined by '-'."},
    "title": {"description": "A short title of the page."},
    "content": {"description": "The page's content in markdown; leave it out to get the type's template."},
    "fields": {"description": "Front-matter fields to set (strings or lists of strings); null removes one."},
    "old_text": {"description": "The exact text to replace; it must occur exactly once in the page."},
    "new_text": {"description": "The text that replaces it."},
    "by": {"description": "The id of the page that replaces this one (create it first)."},
    "reason": {"description": "Why, in a sentence: it is kept on the page."},
    "operation": {"description": "The kind of work in a word: ingest, query, lint, ..."},
    "what": {"description": "What was done, in one line."},
    "pages": {"description": "The ids of the pages the work touched."},
    "collection": {"description": "Search this collection only; left out, every collection served here."},
}
"""Each argument's description and bounds, published in the tools' input schemas."""


def package_version() -> str:
    """The installed chamvi-temporal's version, the server's ``serverInfo.version``."""
    try:
        return version("chamvi-temporal")
    except PackageNotFoundError:  # a checkout that is not installed
        return "0+unknown"


def _described(schema: dict[str, Any], top_k: int) -> dict[str, Any]:
    """``schema`` with each argument's description and bounds (``top_k`` with its default)."""
    properties = {
        name: {**spec, **ARGUMENTS.get(name, {})} for name, spec in schema.get("properties", {}).items()
    }
    if "top_k" in properties:
        properties["top_k"] = {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_TOP_K,
            "default": top_k,
            "description": f"The most passages to return (1 to {MAX_TOP_K}; {top_k} when left out).",
        }
    return {**schema, "properties": properties}


class RetireAnswer(BaseModel):
    """What the person at the MCP client is asked before a page is retired."""

    retire: bool = Field(description="Retire the page?")


def _tool_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Hands the client a chamvi error's message as a tool error (the SDK hides other exceptions)."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return await fn(*args, **kwargs)
        except ChamviError as error:
            raise ToolError(error.message) from None

    return call


class _KnowledgeServer(MCPServer):
    """An ``MCPServer`` that lists the write tools only to a caller that may write."""

    def __init__(self, top_k: int = 5) -> None:
        super().__init__(SERVER_NAME, version=package_version(), log_level="WARNING")
        self.writing: set[str] = set()
        self.top_k = top_k

    async def list_tools(self) -> list[MCPTool]:
        """The tools, their arguments described and bounded.

        Without the write ones for an HTTP caller whose token lacks ``knowledge:write``.
        """
        tools = [
            listed.model_copy(update={"input_schema": _described(listed.input_schema, self.top_k)})
            for listed in await super().list_tools()
        ]
        if _may_write(_CALLER.get()):
            return tools
        return [listed for listed in tools if listed.name not in self.writing]


def _may_write(caller: Token | None) -> bool:
    return caller is None or has_permission(caller.permissions, WRITE_PERMISSION)


def _writing(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Refuses a write tool to an HTTP caller whose token lacks ``knowledge:write``."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        caller = _CALLER.get()
        if not _may_write(caller):
            assert caller is not None
            raise ToolError(f"token {caller.id!r} lacks the permission {WRITE_PERMISSION!r} this tool needs")
        return await fn(*args, **kwargs)

    return call


def knowledge_server(
    store: KnowledgeStore | None = None,
    *,
    collections: Sequence[str] = (),
    search: CollectionSearch | None = None,
    write: bool = False,
    interactive: bool = False,
    top_k: int = 5,
    prefix: str = "knowledge",
) -> MCPServer:
    """An MCP server with the wiki's tools over ``store`` and ``knowledge_search`` over ``collections``.

    Args:
        store: the wiki; None serves no wiki tools.
        collections: the collections ``knowledge_search`` searches (and no other); empty serves no
            ``knowledge_search``.
        search: how it reaches them (a Temporal client); needed with ``collections``.
        write: also serve the wiki's tools that write (``_create``, ``_edit``, ``_rewrite``,
            ``_supersede``, ``_log``); off, the server only reads.
        interactive: also serve ``knowledge_retire``, which asks the person at the client first (it
            writes: give ``write`` too). Leave it off where nobody answers.
        top_k: the passages a search returns when the caller gives no ``top_k``.
        prefix: the wiki tools' names (``<prefix>_read``, ...); with collections too it must not be
            ``knowledge``, or the wiki's ``knowledge_search`` would hide the collections'.

    Raises:
        InvalidAgentDefinitionError: nothing to serve, collections without ``search``, a bad name,
            ``top_k`` or prefix, two tools of one name, or ``interactive`` without a store or
            without ``write``.
    """
    if store is None and not collections:
        raise InvalidAgentDefinitionError(
            "knowledge_server: nothing to serve: give a knowledge store, collections, or both"
        )
    if interactive and store is None:
        raise InvalidAgentDefinitionError(
            "knowledge_server: interactive serves knowledge_retire, a wiki tool: give a knowledge store"
        )
    if interactive and not write:
        raise InvalidAgentDefinitionError(
            "knowledge_server: interactive serves knowledge_retire, a tool that writes: give write=True"
        )
    if store is not None and collections and f"{prefix}_search" == SEARCH:
        raise InvalidAgentDefinitionError(
            f"knowledge_server: the wiki's {SEARCH} would hide the collections' one: give the wiki's tools "
            "another prefix (e.g. prefix='wiki')"
        )
    server = _KnowledgeServer(top_k)
    if store is not None:
        for wiki_tool in knowledge_store_tools(store, interactive=interactive, prefix=prefix):
            if wiki_tool.effect is not None and not write:
                continue
            annotations = WRITES.get(wiki_tool.name.removeprefix(f"{prefix}_"), READS)
            if wiki_tool.name == f"{prefix}_retire":
                _add(server, wiki_tool, _retire(store), annotations)
            else:
                _add(server, wiki_tool, wiki_tool.fn, annotations)
    if collections:
        if search is None:
            raise InvalidAgentDefinitionError(
                "knowledge_server: collections are searched through Temporal: give "
                "search=CollectionSearch(client)"
            )
        searching = knowledge_tools(collections=collections, top_k=top_k)[0]
        _add(server, searching, _search(search, list(dict.fromkeys(collections)), top_k), READS)
    return server


def _add(
    server: _KnowledgeServer, described: Tool, fn: Callable[..., Any], annotations: ToolAnnotations
) -> None:
    served = _tool_errors(fn)
    if described.effect is not None:  # the wiki's effect tools are the ones that write
        server.writing.add(described.name)
        served = _writing(served)
    server.add_tool(served, name=described.name, description=described.description, annotations=annotations)


def allowed_hosts(host: str, named: Sequence[str] = ()) -> list[str]:
    """The ``Host`` header values a server bound to ``host`` answers: ``named`` ones, else loopback's.

    A name without a port allows it on any port.

    Raises:
        McpHostNotAllowedError: ``host`` is not a loopback address and no host is named.
    """
    if named:
        return [value for name in named for value in ((name,) if ":" in name else (name, f"{name}:*"))]
    if not _is_loopback(host):
        raise McpHostNotAllowedError(
            f"--host {host!r} is not a loopback address: name the host names clients reach this server "
            "by with --allowed-host (repeatable), so a foreign Host header is refused"
        )
    return ["127.0.0.1:*", "localhost:*", "[::1]:*"]


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def knowledge_http_app(
    server: MCPServer, *, tokens: Sequence[Token], host: str, hosts: Sequence[str] = ()
) -> ASGIApp:
    """``server`` as streamable HTTP at ``/mcp``, behind bearer tokens and a ``Host`` check.

    Args:
        server: what :func:`knowledge_server` built.
        tokens: the HTTP API's tokens (``CHAMVI_TOKENS``): a request needs ``knowledge:read``, a
            write tool ``knowledge:write``; none: every request answers 401.
        host: the address the server binds.
        hosts: the ``Host`` header values clients send (``wiki.internal``, ``wiki.internal:8765``);
            needed when ``host`` is not a loopback address.

    Raises:
        McpHostNotAllowedError: ``host`` is not a loopback address and ``hosts`` is empty.
    """
    allowed = allowed_hosts(host, hosts)
    origins = [f"{scheme}://{value}" for value in allowed for scheme in ("http", "https")]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=allowed, allowed_origins=origins
    )
    return _BearerTokens(server.streamable_http_app(transport_security=security, host=host), tokens)


class _BearerTokens:
    """Authenticates every HTTP request as the HTTP API does, and leaves its token to the tools."""

    def __init__(self, app: ASGIApp, tokens: Sequence[Token]) -> None:
        self.app = app
        self.authenticator = Authenticator(tokens)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan, which starts the SDK's session manager
            await self.app(scope, receive, send)
            return
        token = await authorize(
            self.authenticator,
            bearer_credentials(scope),
            READ_PERMISSION,
            scope,
            receive,
            send,
            needed_by="this server",
        )
        if token is None:
            return
        reset = _CALLER.set(token)
        try:
            await self.app(scope, receive, send)
        finally:
            _CALLER.reset(reset)


def _search(search: CollectionSearch, allowed: list[str], default_top_k: int) -> Callable[..., Any]:
    known = ", ".join(repr(name) for name in allowed)

    async def knowledge_search(
        query: str, collection: str | None = None, top_k: int | None = None
    ) -> dict[str, Any]:
        if collection is not None and collection not in allowed:
            raise ChamviValidationError(
                f"collection {collection!r} is not searchable here: this server searches {known}"
            )
        limit = default_top_k if top_k is None else top_k
        if not 1 <= limit <= MAX_TOP_K:
            raise ChamviValidationError(f"top_k must be between 1 and {MAX_TOP_K}")
        result = await search.search([collection] if collection else allowed, query, top_k=limit)
        return result.model_dump(mode="json", exclude_none=True)

    return knowledge_search


def _retire(store: KnowledgeStore) -> Callable[..., Any]:
    """``knowledge_retire`` with the person at the MCP client in place of a run's durable approval.

    The question is a resolver's (``Resolve``), so the SDK asks it the way the client's protocol
    version does: mid-call on older versions, as an input-required round trip on newer ones. A client
    that declared no elicitation gets an MCP error saying so, and nothing is retired.
    """

    async def ask(id: str, reason: str) -> Elicit[RetireAnswer]:
        if not reason.strip():
            raise InvalidPageError("give a reason to retire a page: it is kept on the page")
        page = await store.read(id)
        if page is None:
            raise PageNotFoundError(f"page {id!r} does not exist: knowledge_index lists every page by id")
        if page.status == RETIRED:
            raise PageStatusError(f"page {id!r} is already retired")
        linked = ", ".join(page.linked_from) if page.linked_from else "no page"
        question = (
            f"Retire knowledge page {id}?\n{page.title}\nReason: {reason.strip()}\nLinked from: {linked}"
        )
        return Elicit(question, RetireAnswer)

    async def knowledge_retire(id: str, reason: str, answer: Any) -> str:
        if not isinstance(answer, AcceptedElicitation) or not answer.data.retire:
            return "Not retired: a person declined. The page stays as it is."
        await store.retire(id, reason)
        return f"Retired {id}."

    # built here, not written as annotations: the resolver is a closure over the store
    knowledge_retire.__annotations__ = {
        "id": str,
        "reason": str,
        "answer": Annotated[ElicitationResult[RetireAnswer], Resolve(_tool_errors(ask))],
        "return": str,
    }
    return knowledge_retire
