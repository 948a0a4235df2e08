"""Documents of a knowledge collection: what a source yields, checked before anything indexes it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from chamvi.errors import InvalidDocumentError

MAX_ID_CHARS = 255
_ID_REPR_CHARS = 80
_FIELDS = frozenset({"id", "content", "title", "source", "metadata", "version"})


@dataclass(frozen=True)
class Document:
    """One document of a collection, identified by a stable ``id`` within it."""

    id: str
    content: str
    title: str | None = None
    source: str | None = None
    metadata: dict[str, Any] | None = None
    version: str | None = None
    """A token that changes whenever the content may have (a file's size and times, an ETag). It is
    kept with the document's entry, and a source that can tell it without reading the document asks
    ``SourceContext.unchanged`` first, reading only what changed. Not part of the content hash."""


def content_hash(doc: Document) -> str:
    """The sha256 of everything a passage carries, so a change of title or metadata re-indexes too."""
    canonical = json.dumps(
        {"content": doc.content, "title": doc.title, "source": doc.source, "metadata": doc.metadata},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=repr,
    )
    # surrogatepass: hashing never fails, even on an item nobody validated
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def describe_id(value: object) -> str:
    """An id for a message: its repr cut to 80 characters, or only its type when it is no string."""
    if not isinstance(value, str):
        return f"of type {type(value).__name__}"
    text = repr(value[: _ID_REPR_CHARS + 1])
    return text if len(text) <= _ID_REPR_CHARS else text[: _ID_REPR_CHARS - 3] + "..."


def validate_item(raw: object) -> Document:
    """Checks one item a source yielded and returns it as a :class:`Document`.

    Accepts a ``Document`` or a mapping with the keys ``id``, ``content``, ``title``, ``source`` and
    ``metadata``. Messages name the item by its id, never by its content.

    Raises:
        InvalidDocumentError: the item cannot be indexed.
    """
    if isinstance(raw, Document):
        fields: Mapping[str, object] = {
            "id": raw.id,
            "content": raw.content,
            "title": raw.title,
            "source": raw.source,
            "metadata": raw.metadata,
            "version": raw.version,
        }
    elif isinstance(raw, Mapping):
        fields = raw
    else:
        raise InvalidDocumentError(
            f"a source yielded a {type(raw).__name__}: yield a Document or a mapping with 'id' and 'content'"
        )

    doc_id = _check_id(fields.get("id"))
    name = describe_id(doc_id)
    unknown = sorted(repr(key) for key in fields if key not in _FIELDS)
    if unknown:
        raise InvalidDocumentError(
            f"document {name} has unknown field(s) {', '.join(unknown)}: "
            "use id, content, title, source, metadata and version"
        )
    if "content" not in fields:
        raise InvalidDocumentError(f"document {name} has no content")
    content = fields["content"]
    if not isinstance(content, str):
        raise InvalidDocumentError(f"document {name}: content must be a string, not {type(content).__name__}")
    if not _is_unicode(content):
        raise InvalidDocumentError(f"document {name}: content is not valid Unicode (a lone surrogate)")
    title = _optional_text(fields.get("title"), "title", name)
    source = _optional_text(fields.get("source"), "source", name)
    metadata = _check_metadata(fields.get("metadata"), name)
    version = _optional_text(fields.get("version"), "version", name)
    return Document(
        id=doc_id, content=content, title=title, source=source, metadata=metadata, version=version
    )


def _check_id(value: object) -> str:
    if value is None:
        raise InvalidDocumentError("a document has no id: give every document a stable, non-empty string id")
    if not isinstance(value, str):
        raise InvalidDocumentError(f"document id {describe_id(value)} is not a string")
    if not value:
        raise InvalidDocumentError("a document has an empty id: ids are 1 to 255 characters")
    if len(value) > MAX_ID_CHARS:
        raise InvalidDocumentError(
            f"document id {describe_id(value)} has {len(value)} characters: ids are 1 to 255 characters"
        )
    if "\x00" in value:
        raise InvalidDocumentError(f"document id {describe_id(value)} contains a NUL character")
    if not _is_unicode(value):
        raise InvalidDocumentError(
            f"document id {describe_id(value)} is not valid Unicode (a lone surrogate)"
        )
    return value


def _optional_text(value: object, field: str, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidDocumentError(
            f"document {name}: {field} must be a string or None, not {type(value).__name__}"
        )
    if not _is_unicode(value):
        raise InvalidDocumentError(f"document {name}: {field} is not valid Unicode (a lone surrogate)")
    return value


def _check_metadata(value: object, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    problem = (
        f"document {name}: metadata must be a plain JSON object "
        "(a dict with string keys and JSON values: strings, numbers, booleans, null, lists, dicts)"
    )
    if not isinstance(value, dict):
        raise InvalidDocumentError(f"{problem}, not a {type(value).__name__}")
    try:
        copy: dict[str, Any] = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError):
        raise InvalidDocumentError(problem) from None
    # json.dumps quietly turns tuples into lists and int keys into strings: insist on a round trip
    if copy != value:
        raise InvalidDocumentError(problem)
    return copy


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
