"""Artifacts: the files a run receives (attachments) and the files its tools make (``ctx.artifacts``).

Bytes live in an object store, never in Temporal history: a folder under the data folder by default
(``<data>/artifacts``), any S3-compatible store in production (``CHAMVI_ARTIFACTS_URL=s3://bucket/prefix``,
credentials and endpoint from the usual ``AWS_*`` variables). Both go through ``obstore``: one small
client (a Rust core, no boto stack) with async calls for local folders, S3 and memory alike, so the
embedded default and production run the same code. History carries :class:`~chamvi.models.Artifact`
references only.

Layout in the store: ``<run>/<NNNN>`` holds the bytes and ``<run>/<NNNN>.json`` the record, written
after the bytes, so a listing never shows an artifact whose bytes are not all there. Ids are
deterministic (``<run_id>.<index>``) and writes overwrite: a tool call that runs again after a crash
puts the same file under the same id, and the store holds it once. In a folder, obstore writes each
file as ``<name>#<n>`` and renames it when complete; a process killed in between leaves that file,
which the redone put removes (on S3 an interrupted upload is the bucket's to expire: a lifecycle
rule that aborts incomplete multipart uploads).
"""

from __future__ import annotations

import asyncio
import glob
import hashlib
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import obstore
from obstore.store import LocalStore, MemoryStore, from_url

from chamvi._constants import ARTIFACT_INDEX_DIGITS, ARTIFACT_MEDIA_TYPE_PATTERN
from chamvi._infrastructure import bookkeeping
from chamvi.errors import (
    ArtifactNotFoundError,
    AttachmentTooLargeError,
    ChamviValidationError,
    InvalidInputError,
    ValidationIssue,
    shown,
)
from chamvi.models import Artifact, FilePart, ProviderOptions
from chamvi.settings import Settings

if TYPE_CHECKING:  # obstore's type stubs only
    from obstore.store import ClientConfig, ObjectStore

_ID = re.compile(rf"^(?P<run>.+)\.(?P<index>[0-9]{{{ARTIFACT_INDEX_DIGITS},}})$")
_MAX_FOLDER_LENGTH = 255
"""The longest name of a folder on common file systems: no run id of chamvi's is near it."""
_MEDIA_TYPE = re.compile(ARTIFACT_MEDIA_TYPE_PATTERN)


def artifact_id(run_id: str, index: int) -> str:
    """The id of a run's ``index``-th artifact: ``<run_id>.0000`` and on, in input order."""
    return f"{run_id}.{index:0{ARTIFACT_INDEX_DIGITS}d}"


def parse_artifact_id(value: str) -> tuple[str, int]:
    """The run id and index of an artifact id.

    Raises:
        InvalidInputError: ``value`` is not an artifact id as :func:`artifact_id` writes it (a
            canonical index, a run id that can name a folder).
    """
    match = _ID.match(value)
    run_id, index = (match["run"], int(match["index"])) if match is not None else ("", 0)
    # one id per artifact: '<run>.00000' is not another name of '<run>.0000'
    if match is None or artifact_id(run_id, index) != value or not names_a_folder(run_id):
        raise InvalidInputError(
            f"artifact id {shown(value)} is malformed: artifact ids look like '<run_id>.0000', one per "
            "artifact, as `chamvi artifacts list RUN` lists them"
        )
    return run_id, index


def names_a_folder(name: str) -> bool:
    """Whether ``name``, quoted as the stores quote a run or a conversation, can name a folder.

    ``.`` and ``..`` cannot, nor a name over 255 bytes once quoted (``é`` is six: ``%C3%A9``).
    """
    return name not in (".", "..") and len(_folder(name)) <= _MAX_FOLDER_LENGTH


def guess_media_type(filename: str) -> str:
    """The media type a file's name suggests; unknown kinds are ``application/octet-stream``."""
    return mimetypes.guess_type(filename)[0] or "application/octet-stream"


def is_artifact_media_type(value: object) -> bool:
    """Whether ``value`` is a media type an artifact may have: ``type/subtype``, without parameters.

    The seed's ``isArtifactMediaType``: ``image/png`` and ``Text/Plain`` are, ``png`` and
    ``text/plain; charset=utf-8`` are not (an artifact's bytes are what they are; a text's encoding
    is for the reader to tell).
    """
    return isinstance(value, str) and _MEDIA_TYPE.match(value.lower()) is not None


def artifact_file_part(
    artifact: Artifact, *, filename: str | None = None, provider_options: ProviderOptions | None = None
) -> FilePart:
    """A stored artifact as a file part: return it from a tool (alone, or in a list with text).

    The seed's ``artifactFilePart``. The model gets the file's bytes (an image as an image, a PDF as a
    file, as its provider takes them), read from the artifact store for each model call; the step's
    recorded output and the run's transcript keep this reference, never the bytes. A missing
    artifact fails the run's next model call with ``artifact_not_found``, as an attachment does.

        @tool
        async def chart(ctx: ToolContext) -> list[str | FilePart]:
            png = await ctx.artifacts.put("image/png", render())
            return ["The chart of this week:", artifact_file_part(png)]

    Args:
        artifact: the artifact's reference (what ``ctx.artifacts.put`` returned, or ``list()`` lists).
        filename: the name the model sees; the artifact's own by default.
        provider_options: per provider name, options for the part (``{"openai": {"detail": "low"}}``).

    Raises:
        InvalidInputError: ``artifact`` is not an artifact reference.
    """
    if not isinstance(artifact, Artifact):
        raise InvalidInputError(
            f"artifact_file_part takes an Artifact (what ctx.artifacts.put returns), not {artifact!r}"
        )
    return FilePart(
        media_type=artifact.media_type,
        artifact=artifact,
        filename=filename or artifact.filename,
        provider_options=provider_options or {},
    )


def check_media_type(media_type: str, where: tuple[str | int, ...] = ("media_type",)) -> str:
    """``media_type`` lower-cased, once it is ``type/subtype`` (:func:`is_artifact_media_type`).

    Args:
        media_type: the media type given.
        where: its path in what the caller sent, for the error's issue.

    Raises:
        ChamviValidationError: it is not, with one issue at ``where``.
    """
    normalized = media_type.strip().lower() if isinstance(media_type, str) else ""
    if is_artifact_media_type(normalized):
        return normalized
    base = normalized.partition(";")[0].strip()
    if ";" in normalized and is_artifact_media_type(base):
        message = (
            f"media type {media_type!r} has parameters: an artifact's media type is type/subtype only, "
            f"write {base!r}"
        )
    else:
        message = f"media type {media_type!r} is invalid: write it as type/subtype, e.g. 'image/png'"
    raise ChamviValidationError(message, issues=[ValidationIssue(where, message, "media_type")])


def open_artifact_store(settings: Settings) -> ArtifactStore:
    """The store the settings name: ``artifacts_url``, else ``<data>/artifacts``."""
    if settings.artifacts_url:
        return ArtifactStore.open(settings.artifacts_url)
    return ArtifactStore.local(settings.data / "artifacts")


def _folder(run_id: str) -> str:
    # a run id is any Temporal workflow id: quoted, it is one path segment of any store
    return quote(run_id, safe="-_")


class ArtifactStore:
    """The object store that holds every run's artifacts, shared by workers, the API and the CLI.

    Args:
        store: an obstore store (local folder, S3-compatible, memory).
        location: where it is, for messages.
    """

    def __init__(self, store: ObjectStore, location: str) -> None:
        self.store = store
        self.location = location
        self._folder = Path(store.prefix) if isinstance(store, LocalStore) and store.prefix else None

    @classmethod
    def memory(cls) -> ArtifactStore:
        """A store in this process's memory (tests, and workers built without settings)."""
        return cls(MemoryStore(), "memory")

    @classmethod
    def local(cls, folder: Path) -> ArtifactStore:
        """A store in ``folder``, created when missing (the embedded default)."""
        folder.mkdir(parents=True, exist_ok=True)
        return cls(LocalStore(folder), str(folder))

    @classmethod
    def open(cls, url: str, **config: Any) -> ArtifactStore:
        """A store at ``url`` (``s3://bucket/prefix``, ``file:///folder``, ``memory:///``).

        ``config`` reaches obstore (``endpoint``, ``access_key_id``, ``region``, ...); what it leaves
        out, obstore reads from the ``AWS_*`` environment variables. An ``http://`` endpoint (a local
        S3-compatible server) is allowed.

        Raises:
            InvalidInputError: obstore cannot build a store from ``url``.
        """
        client_options: ClientConfig | None = None
        if str(config.get("endpoint", "")).startswith("http:"):
            client_options = {"allow_http": True}
        try:
            store = from_url(url, client_options=client_options, **config)
        except Exception as error:
            raise InvalidInputError(f"cannot open artifact store {url!r}: {error}") from None
        return cls(store, url)

    async def put(
        self, run_id: str, index: int, media_type: str, data: bytes, filename: str | None = None
    ) -> Artifact:
        """Stores ``data`` as the run's ``index``-th artifact; the same call again stores it again, once.

        Raises:
            InvalidInputError: a malformed media type or a file name holding a path.
        """
        if filename is not None and (not filename or any(ch in filename for ch in "/\\\0")):
            raise InvalidInputError(
                f"file name {filename!r} is invalid: give a bare name, e.g. 'invoice.pdf'"
            )
        artifact = Artifact(
            id=artifact_id(run_id, index),
            run_id=run_id,
            media_type=check_media_type(media_type),
            filename=filename,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        path = self._path(run_id, index)
        await asyncio.to_thread(self._remove_partial, path)
        await obstore.put_async(self.store, path, data)
        await obstore.put_async(self.store, f"{path}.json", artifact.model_dump_json().encode())
        return artifact

    def _remove_partial(self, path: str) -> None:
        """Removes what an interrupted put of ``path`` left in a folder (obstore's ``<name>#<n>``)."""
        if self._folder is None:
            return
        target = self._folder / path
        for partial in target.parent.glob(f"{glob.escape(target.name)}*#*"):
            name = partial.name.partition("#")[0]
            if name in (target.name, f"{target.name}.json"):
                partial.unlink(missing_ok=True)

    async def info(self, artifact_id: str) -> Artifact:
        """The record of an artifact.

        Raises:
            InvalidInputError: a malformed id.
            ArtifactNotFoundError: the store holds no such artifact.
        """
        run_id, index = parse_artifact_id(artifact_id)
        record = await self._read(f"{self._path(run_id, index)}.json", artifact_id)
        return Artifact.model_validate_json(record)

    async def read(self, artifact_id: str) -> bytes:
        """The bytes of an artifact.

        Raises:
            InvalidInputError: a malformed id.
            ArtifactNotFoundError: the store holds no such artifact.
        """
        run_id, index = parse_artifact_id(artifact_id)
        return await self._read(self._path(run_id, index), artifact_id)

    async def list(self, run_id: str) -> list[Artifact]:
        """A run's artifacts in input order (none for a run that has none).

        Raises:
            InvalidInputError: ``run_id`` cannot name a folder of the store (``..``, over 255 bytes
                quoted), so no run of it has artifacts.
        """
        if not names_a_folder(run_id):
            raise InvalidInputError(
                f"run id {shown(run_id)} is no run's: it cannot name a folder of the artifact store"
            )
        entries = await obstore.list(self.store, prefix=f"{_folder(run_id)}/").collect_async()
        records = [str(e["path"]) for e in entries if str(e["path"]).endswith(".json")]
        bodies = await asyncio.gather(*(self._read(path, path) for path in records))
        return sorted(
            (Artifact.model_validate_json(body) for body in bodies), key=lambda a: parse_artifact_id(a.id)[1]
        )

    def _path(self, run_id: str, index: int) -> str:
        return f"{_folder(run_id)}/{index:0{ARTIFACT_INDEX_DIGITS}d}"

    async def _read(self, path: str, artifact_id: str) -> bytes:
        try:
            result = await obstore.get_async(self.store, path)
            return bytes(await result.bytes_async())
        except FileNotFoundError:
            raise ArtifactNotFoundError(
                f"artifact {artifact_id!r} is not in the artifact store at {self.location}"
            ) from None


@dataclass
class RunArtifacts:
    """``ctx.artifacts``: the artifacts of the run a tool call belongs to.

    ``put`` numbers on from the artifacts the run held when the call began, so its ids are the same
    each time the call runs (a retry after a crash, a run after an approval): it is no effect by
    itself, and inside an ``effect_tool`` the file is stored exactly once.
    """

    store: ArtifactStore
    run_id: str
    base: int
    new: list[Artifact] = field(default_factory=list)

    @bookkeeping("storing an artifact of the run")
    async def put(self, media_type: str, data: bytes | str, filename: str | None = None) -> Artifact:
        """Stores a file as the run's next artifact and answers its reference.

        Text is stored as UTF-8.

        Raises:
            InvalidInputError: a malformed media type or file name.
        """
        body = data.encode() if isinstance(data, str) else bytes(data)
        artifact = await self.store.put(self.run_id, self.base + len(self.new), media_type, body, filename)
        self.new.append(artifact)
        return artifact

    @bookkeeping("reading an artifact of the run")
    async def get(self, artifact_id: str) -> bytes:
        """The bytes of an artifact of this run.

        Raises:
            InvalidInputError: a malformed id, or one of another run.
            ArtifactNotFoundError: no such artifact.
        """
        run_id, _ = parse_artifact_id(artifact_id)
        if run_id != self.run_id:
            raise InvalidInputError(f"artifact {artifact_id!r} belongs to run {run_id!r}, not to this run")
        return await self.store.read(artifact_id)

    @bookkeeping("listing the artifacts of the run")
    async def list(self) -> list[Artifact]:
        """This run's artifacts so far: its attachments, then what its tools put, in order."""
        # what an earlier, interrupted attempt of this call put past ``base`` is not the run's
        earlier = [a for a in await self.store.list(self.run_id) if parse_artifact_id(a.id)[1] < self.base]
        return [*earlier, *self.new]


@dataclass(frozen=True)
class Attachment:
    """A file to dispatch a run with (``ChamviClient.dispatch(attachments=[...])``).

    Args:
        data: the file's bytes.
        filename: its name, shown to the model and kept on the artifact.
        media_type: ``type/subtype``; by default guessed from ``filename``.
    """

    data: bytes
    filename: str | None = None
    media_type: str | None = None

    @classmethod
    def from_path(cls, path: str | Path, media_type: str | None = None) -> Attachment:
        """The file at ``path``, named after it.

        Raises:
            InvalidInputError: no readable file there.
        """
        file = Path(path)
        try:
            data = file.read_bytes()
        except OSError as error:
            problem = error.strerror or error
            raise InvalidInputError(f"cannot read attachment {str(file)!r}: {problem}") from None
        return cls(data=data, filename=file.name, media_type=media_type)

    @property
    def kind(self) -> str:
        """The media type, given or guessed from the file name."""
        return self.media_type or guess_media_type(self.filename or "")

    def check_size(self, limit: int) -> None:
        """Refuses a file over ``limit`` bytes.

        Raises:
            AttachmentTooLargeError: it is over.
        """
        check_attachment_size(self.filename, len(self.data), limit)


def check_attachment_size(filename: str | None, size: int, limit: int) -> None:
    """Refuses an attachment of ``size`` bytes over ``limit``.

    Raises:
        AttachmentTooLargeError: it is over, naming the file, its size and the limit.
    """
    if size > limit:
        raise AttachmentTooLargeError(
            f"attachment {filename or '(unnamed)'!r} is {size:,} bytes, over the limit "
            f"of {limit:,} bytes per attachment (CHAMVI_ATTACHMENT_MAX_BYTES)"
        )
