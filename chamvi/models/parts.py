"""Content parts: what a message holds besides plain text, provider-neutral.

A message's ``content`` is a string or a list of parts. Their JSON form, as history, the HTTP API
and every provider see it::

    {"type": "text", "text": "All checks passed."}
    {"type": "image", "media_type": "image/png", "artifact": {...}}   # or "data": <base64>, or "url"
    {"type": "file", "media_type": "application/pdf", "filename": "terms.pdf", "artifact": {...}}

each with optional ``"provider_options": {"<provider>": {...}}``, which only that provider reads
(``chamvi.providers.openai`` says what ``"openai"`` options do). An image or file part has exactly
one source: an ``artifact`` reference (the bytes stay in the artifact store and are read for each
model call), inline ``data`` (small: at most :data:`~chamvi._constants.INLINE_PART_MAX_BYTES`), or a
``url``. Audio, video and anything else are file parts of their media type (``audio/wav``): each
provider sends what its API takes and says what it does with the rest.

History carries references only: a tool's result may hold parts with an artifact or a URL (see
:func:`tool_output_parts`), never inline bytes.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator
from pydantic import ValidationError as PydanticValidationError

from chamvi._constants import ARTIFACT_MEDIA_TYPE_PATTERN, INLINE_PART_MAX_BYTES
from chamvi.models.artifacts import Artifact

ProviderOptions = dict[str, dict[str, Any]]
"""Per provider name, what that provider adds to the message or part it sends:
``{"openai": {"detail": "low"}}``. Other providers ignore the entry."""

_MEDIA_TYPE = re.compile(ARTIFACT_MEDIA_TYPE_PATTERN)
_URL_SCHEMES = ("https://", "http://", "data:")


def _empty(value: object) -> bool:
    return not value


def _absent(value: object) -> bool:
    return value is None


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    type: str
    provider_options: ProviderOptions = Field(default_factory=dict, exclude_if=_empty)
    """Options for one provider, by its name; left out of the stored form when there are none."""


class TextPart(_Part):
    """Text, as one part of a message's content."""

    type: Literal["text"] = "text"
    text: str


class _MediaPart(_Part):
    """An image or a file: a media type and one source (an artifact, inline bytes, a URL)."""

    media_type: str | None = Field(default=None, exclude_if=_absent)
    """``type/subtype``; an artifact's own when left out."""
    artifact: Artifact | None = Field(default=None, exclude_if=_absent)
    """A stored file by reference: the bytes are read from the artifact store for each model call."""
    data: bytes | None = Field(default=None, exclude_if=_absent)
    """Small inline bytes (base64 in JSON), for configured instructions; never in a run's history."""
    url: str | None = Field(default=None, exclude_if=_absent)
    """An ``https://`` (or ``data:``) URL the provider passes on, where its API takes one."""

    @model_validator(mode="after")
    def _one_source(self) -> _MediaPart:
        sources = [name for name in ("artifact", "data", "url") if getattr(self, name) is not None]
        if len(sources) != 1:
            given = ", ".join(sources) or "none"
            raise ValueError(f"an {self.type} part takes exactly one of artifact, data, url (given: {given})")
        if self.media_type is None and self.artifact is not None:
            self.media_type = self.artifact.media_type
        if self.media_type is not None:
            self.media_type = self.media_type.strip().lower()
            if not _MEDIA_TYPE.match(self.media_type):
                raise ValueError(
                    f"media type {self.media_type!r} is invalid: write it as type/subtype, e.g. 'image/png', "
                    "without parameters"
                )
        if self.data is not None:
            if self.media_type is None:
                raise ValueError(f"an {self.type} part with inline data needs its media_type")
            if len(self.data) > INLINE_PART_MAX_BYTES:
                raise ValueError(
                    f"inline data of {len(self.data):,} bytes is over {INLINE_PART_MAX_BYTES:,}: store the "
                    "file as an artifact, or give a url"
                )
        if self.url is not None and not self.url.startswith(_URL_SCHEMES):
            raise ValueError(f"url {self.url[:80]!r} must be an https://, http:// or data: URL")
        return self


class ImagePart(_MediaPart):
    """An image, as one part of a user message's content (or a tool's result)."""

    type: Literal["image"] = "image"

    @model_validator(mode="after")
    def _an_image(self) -> ImagePart:
        if self.media_type is not None and not self.media_type.startswith("image/"):
            raise ValueError(f"an image part's media type must be image/..., not {self.media_type!r}")
        return self


class FilePart(_MediaPart):
    """A file of any media type (a PDF, a text, audio, an image), as one part of a message's content."""

    type: Literal["file"] = "file"
    filename: str | None = Field(default=None, exclude_if=_absent)
    """The name shown to the model; an artifact's own when left out."""

    @model_validator(mode="after")
    def _named(self) -> FilePart:
        if self.media_type is None:
            raise ValueError("a file part needs its media_type")
        if self.filename is None and self.artifact is not None:
            self.filename = self.artifact.filename
        return self


ContentPart = Annotated[TextPart | ImagePart | FilePart, Field(discriminator="type")]
"""One part of a message's content: text, an image or a file."""

MediaPart = ImagePart | FilePart
"""A part whose bytes a provider sends: an image or a file."""

_PART: TypeAdapter[TextPart | ImagePart | FilePart] = TypeAdapter(ContentPart)


def tool_output_parts(output: Any) -> list[TextPart | ImagePart | FilePart] | None:
    """A tool's result as content parts, when it is made of them; None for any other result.

    A result is made of parts when it is one image or file part (``artifact_file_part(...)``), or a
    list of strings and parts holding at least one image or file part; the strings become text
    parts. Anything else (a dict that is not exactly a part, a list with other items) is an ordinary
    JSON result. Pure and deterministic: the workflow builds the tool message with it.
    """
    items = output if isinstance(output, list) else [output]
    if not any(isinstance(item, dict) and item.get("type") in ("image", "file") for item in items):
        return None
    parts: list[TextPart | ImagePart | FilePart] = []
    for item in items:
        if isinstance(item, str):
            parts.append(TextPart(text=item))
            continue
        if not isinstance(item, dict):
            return None
        try:
            parts.append(_PART.validate_python(item))
        except PydanticValidationError:
            return None
    return parts
