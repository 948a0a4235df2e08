"""``/knowledge``: managed collections, as the knowledge seed's "Managed collections" describes.

``knowledge:read`` for every GET, ``knowledge:write`` for the rest. Document ids travel
percent-encoded in the path (``a%2Fb`` is the id ``a/b``), hence the ``{document_id:path}`` routes.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import unquote_to_bytes

from fastapi import APIRouter, Body, Depends, Path, Query, Request, Response

from chamvi.errors import InvalidInputError
from chamvi.http.auth import permission
from chamvi.http.errors import error_responses
from chamvi.http.schemas import (
    CollectionList,
    CollectionOut,
    CreateCollection,
    DocumentList,
    DocumentOut,
    DocumentStatus,
    PutDocument,
    PutResult,
)
from chamvi.knowledge.collections import MANAGED_BASE_PATH
from chamvi.knowledge.documents import MAX_ID_CHARS
from chamvi.knowledge.managed import ManagedCollections

READ = "knowledge:read"
WRITE = "knowledge:write"

CollectionName = Annotated[
    str, Path(min_length=1, max_length=255, description="The collection's name", examples=["tickets"])
]
_DocumentIdPath = Annotated[
    str,
    Path(
        min_length=1,
        max_length=MAX_ID_CHARS,
        description="1 to 255 characters, percent-encoded UTF-8 (a%2Fb is the id a/b)",
        examples=["T-1042"],
    ),
]
_DOCUMENTS_SEGMENT = b"/documents/"
_COLLECTIONS_SEGMENT = b"/collections/"


def _utf8_document_id(request: Request, document_id: _DocumentIdPath) -> str:
    """The path's document id, refused when its percent-encoded bytes are not UTF-8.

    The server decodes the path leniently: every invalid sequence becomes U+FFFD, so ``%FF%FE``
    and ``%FE%FF`` would both name the id ``\ufffd\ufffd`` and one document would replace the
    other. The raw path tells them apart (a U+FFFD sent as ``%EF%BF%BD`` stays a valid id).
    """
    raw = request.scope.get("raw_path")
    if "\ufffd" not in document_id or not isinstance(raw, bytes):
        return document_id
    # the collection's name is one segment: the id is all that follows the segment after it
    start = raw.find(_DOCUMENTS_SEGMENT, raw.find(_COLLECTIONS_SEGMENT) + 1)
    sent = raw[start + len(_DOCUMENTS_SEGMENT) :]
    try:
        unquote_to_bytes(sent).decode("utf-8")
    except UnicodeDecodeError:
        shown = sent.decode("ascii", "backslashreplace")
        raise InvalidInputError(
            f"document id {shown!r} is not UTF-8 once percent-decoded: "
            "percent-encode the id's UTF-8 bytes (ü is %C3%BC)"
        ) from None
    return document_id


DocumentId = Annotated[str, Depends(_utf8_document_id)]
_WITH_NAME = (401, 403, 404, 422)
_WITH_BODY = (400, 401, 403, 413, 422)


def knowledge_router(managed: ManagedCollections, prefix: str = MANAGED_BASE_PATH) -> APIRouter:
    """The ``/knowledge`` routes over ``managed``: collections and their documents.

    Args:
        managed: the service behind the routes.
        prefix: where they are (``ManagedRoutes.base_path``), below the API's base path.
    """
    router = APIRouter(prefix=prefix, tags=["knowledge"])

    @router.post(
        "/collections",
        status_code=201,
        response_model=CollectionOut,
        responses=error_responses(*_WITH_BODY, 409),
        openapi_extra=permission(WRITE),
        summary="Create a managed collection",
    )
    async def create_collection(body: Annotated[CreateCollection, Body()]) -> CollectionOut:
        """Creates an empty, untrusted collection embedded with the default model.

        The default model is `CHAMVI_KNOWLEDGE_MODEL`, else the app's `embedding_model`; neither: 409.
        """
        return CollectionOut.of(await managed.create(body.name))

    @router.get(
        "/collections",
        response_model=CollectionList,
        responses=error_responses(401, 403),
        openapi_extra=permission(READ),
        summary="List collections",
    )
    async def list_collections() -> CollectionList:
        """Every collection, declared and managed, with its status, model, generation and counts."""
        return CollectionList(data=[CollectionOut.of(m) for m in await managed.list()])

    @router.get(
        "/collections/{name}",
        response_model=CollectionOut,
        responses=error_responses(*_WITH_NAME),
        openapi_extra=permission(READ),
        summary="Show a collection",
    )
    async def get_collection(name: CollectionName) -> CollectionOut:
        return CollectionOut.of(await managed.get(name))

    @router.delete(
        "/collections/{name}",
        status_code=204,
        response_class=Response,
        responses=error_responses(*_WITH_NAME, 409),
        openapi_extra=permission(WRITE),
        summary="Delete a collection",
    )
    async def delete_collection(name: CollectionName) -> Response:
        """Removes a managed (or orphaned) collection with everything in it; a declared one is 409."""
        await managed.delete(name)
        return Response(status_code=204)

    @router.post(
        "/collections/{name}/sync",
        status_code=202,
        response_model=CollectionOut,
        responses=error_responses(*_WITH_NAME, 409),
        openapi_extra=permission(WRITE),
        summary="Run a pass now",
    )
    async def sync_collection(name: CollectionName) -> CollectionOut:
        """Asks for a pass now, whatever the collection's resync schedule.

        A managed collection embeds its pending documents, and when stale is re-embedded into a new
        generation with the default model (switching once complete).
        """
        await managed.sync(name)
        return CollectionOut.of(await managed.get(name))

    @router.put(
        "/collections/{name}/documents/{document_id:path}",
        status_code=202,
        response_model=PutResult,
        responses={
            200: {"model": PutResult, "description": "The same content is already embedded: nothing to do"},
            **error_responses(*_WITH_BODY, 404, 409),
        },
        openapi_extra=permission(WRITE),
        summary="Put a document",
    )
    async def put_document(
        name: CollectionName,
        document_id: DocumentId,
        body: Annotated[PutDocument, Body()],
        response: Response,
    ) -> PutResult:
        """Stores the document and answers 202 (`pending`): it is embedded in the background.

        Its previous content keeps answering searches until then. The same content again answers 200
        and embeds nothing; a failed document is tried again by any new PUT.
        """
        entry, accepted = await managed.put(
            name,
            document_id,
            content=body.content,
            title=body.title,
            source=body.source,
            metadata=body.metadata,
        )
        if not accepted:
            response.status_code = 200
        return PutResult(status=entry.status)

    @router.get(
        "/collections/{name}/documents",
        response_model=DocumentList,
        responses=error_responses(*_WITH_NAME),
        openapi_extra=permission(READ),
        summary="List documents",
    )
    async def list_documents(
        name: CollectionName,
        status: Annotated[DocumentStatus | None, Query(alias="filter[status]")] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> DocumentList:
        """Documents by id, optionally only those `pending`, `ready` or `failed`."""
        return DocumentList.of(await managed.documents(name, status=status, limit=limit, offset=offset))

    @router.get(
        "/collections/{name}/documents/{document_id:path}",
        response_model=DocumentOut,
        responses=error_responses(*_WITH_NAME),
        openapi_extra=permission(READ),
        summary="Show a document",
    )
    async def get_document(name: CollectionName, document_id: DocumentId) -> DocumentOut:
        """`pending`, `ready`, or `failed` with the provider's error (never the content)."""
        return DocumentOut.of(await managed.document(name, document_id))

    @router.delete(
        "/collections/{name}/documents/{document_id:path}",
        status_code=204,
        response_class=Response,
        responses=error_responses(*_WITH_NAME, 409),
        openapi_extra=permission(WRITE),
        summary="Delete a document",
    )
    async def delete_document(name: CollectionName, document_id: DocumentId) -> Response:
        """Removes the document: it is gone from the next search."""
        await managed.delete_document(name, document_id)
        return Response(status_code=204)

    return router
