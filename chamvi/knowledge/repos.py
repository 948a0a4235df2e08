"""``git(url, ref=..., path=..., extensions=...)``: the Markdown and text files of a repository at a ref.

Runs the ``git`` binary (``git fetch``, ``ls-tree``, ``cat-file --batch``) rather than a Python
implementation such as dulwich: git's own transports, credential helpers and SSH config work as the
user's do, and its pack handling stays fast on large repositories. Each pass fetches ``ref`` (depth 1)
into a bare cache repository, so a branch is resolved to a commit every pass; a file's version is its
blob id, so only files whose blob changed since the last pass are read.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge.documents import MAX_ID_CHARS, Document
from chamvi.knowledge.sources import MAX_FILE_BYTES, SourceContext, first_heading

GIT_EXTENSIONS: tuple[str, ...] = (".md", ".markdown", ".mdx", ".txt")
_BATCH = 256
_REGULAR_MODES = frozenset({"100644", "100755"})


class _GitFailed(Exception):
    pass


async def _git(*args: str, stdin: bytes | None = None) -> bytes:
    # stdin is never a terminal here, so git asks no one for a password: it fails the fetch instead
    process = await asyncio.create_subprocess_exec(
        "git",
        *args,
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate(stdin)
    if process.returncode != 0:
        raise _GitFailed(err.decode("utf-8", "replace").strip().splitlines()[-1:][0] if err.strip() else "")
    return out


@dataclass(frozen=True)
class GitSource:
    """The files of ``url`` at ``ref`` below ``path`` (see :func:`git`)."""

    url: str
    ref: str = "HEAD"
    path: str = ""
    extensions: tuple[str, ...] = GIT_EXTENSIONS
    trusted: bool | None = False
    cache: Path | None = None
    kind: str = "git"

    def check(self) -> None:
        """Refuses at boot a machine without the ``git`` binary (the arguments were checked by :func:`git`).

        Raises:
            InvalidAgentDefinitionError: ``git`` is not on the PATH.
        """
        if shutil.which("git") is None:
            raise InvalidAgentDefinitionError(
                f"git({self.url!r}) needs the git binary: install git on the worker's machine"
            )

    @property
    def cache_dir(self) -> Path:
        """The bare repository each pass fetches into."""
        if self.cache is not None:
            return self.cache
        key = hashlib.sha256(self.url.encode()).hexdigest()[:16]
        return Path(tempfile.gettempdir()) / "chamvi-git" / key

    async def resolve(self) -> str:
        """Fetches ``ref`` and answers the commit it names now.

        Raises:
            _GitFailed: git could not fetch the ref (unreachable repository, unknown ref).
        """
        cache = self.cache_dir
        if not (cache / "HEAD").exists():
            cache.mkdir(parents=True, exist_ok=True)
            await _git("init", "--bare", "--quiet", str(cache))
        await _git("-C", str(cache), "fetch", "--quiet", "--depth=1", "--no-tags", self.url, self.ref)
        return (await _git("-C", str(cache), "rev-parse", "FETCH_HEAD^{commit}")).decode().strip()

    async def documents(self, ctx: SourceContext) -> AsyncIterator[Document]:
        """Every matching file at the ref's commit; unchanged blobs are not read."""
        self.check()
        try:
            commit = await self.resolve()
            listing = await _git(
                "-C", str(self.cache_dir), "ls-tree", "-r", "-l", "-z", commit, "--", self.path or "."
            )
        except _GitFailed as error:
            message = f"git {self.url!r} at {self.ref!r} could not be read ({error}); the read is incomplete"
            ctx.on_error(message)
            ctx.incomplete(message)
            return
        files: list[tuple[str, str]] = []
        prefix = self.path.rstrip("/") + "/" if self.path else ""
        for record in listing.split(b"\0"):
            if not record:
                continue
            meta, _, name_bytes = record.partition(b"\t")
            mode, kind, blob, size = meta.decode().split()
            try:
                name = name_bytes.decode("utf-8")
            except UnicodeDecodeError:
                ctx.on_error(f"skipped {name_bytes!r}: its path is not UTF-8")
                continue
            rel = name.removeprefix(prefix)
            if kind != "blob" or not rel.lower().endswith(self.extensions) or rel.startswith("."):
                continue
            if mode not in _REGULAR_MODES:
                ctx.on_error(f"skipped {rel!r}: a symbolic link or submodule (never followed)")
            elif len(rel) > MAX_ID_CHARS:
                ctx.on_error(f"skipped {rel[:80]!r}...: its path has {len(rel)} characters, over 255")
            elif int(size) > MAX_FILE_BYTES:
                ctx.on_error(f"skipped {rel!r}: over 1 MiB")
            else:
                files.append((rel, blob))
        for start in range(0, len(files), _BATCH):
            if ctx.cancellation.is_set():
                ctx.incomplete("the read was cancelled")
                return
            batch = files[start : start + _BATCH]
            unchanged = await ctx.unchanged(batch)
            wanted = [(rel, blob) for rel, blob in batch if rel not in unchanged]
            for rel, blob, data in await self.read_blobs(wanted):
                try:
                    text = data.decode("utf-8").removeprefix("\ufeff")
                except UnicodeDecodeError:
                    ctx.on_error(f"skipped {rel!r}: not UTF-8")
                    continue
                title = first_heading(text) or rel.rpartition("/")[2]
                yield Document(id=rel, content=text, title=title, source=rel, version=blob)

    async def read_blobs(self, files: list[tuple[str, str]]) -> list[tuple[str, str, bytes]]:
        """The contents of these blobs, in one ``git cat-file --batch``."""
        if not files:
            return []
        request = "".join(f"{blob}\n" for _, blob in files).encode()
        out = await _git("-C", str(self.cache_dir), "cat-file", "--batch", stdin=request)
        read: list[tuple[str, str, bytes]] = []
        position = 0
        for rel, blob in files:
            header_end = out.index(b"\n", position)
            size = int(out[position:header_end].split()[2])
            read.append((rel, blob, out[header_end + 1 : header_end + 1 + size]))
            position = header_end + 1 + size + 1
        return read


def git(
    url: str,
    *,
    ref: str = "HEAD",
    path: str = "",
    extensions: Iterable[str] = GIT_EXTENSIONS,
    trusted: bool | None = False,
    cache: str | os.PathLike[str] | None = None,
) -> GitSource:
    """The Markdown and text files of the repository ``url`` at ``ref`` (a branch, tag or commit).

    Args:
        url: what ``git fetch`` takes: ``https://...``, ``ssh://...``, ``git@host:repo``, ``file://...``.
        ref: resolved to a commit on every pass (``HEAD``: the default branch).
        path: a folder of the repository to read (``docs``); document ids are relative to it.
        extensions: the suffixes of the files read.
        trusted: untrusted by default: a search over the files taints the run.
        cache: the bare repository passes fetch into (default: one per URL in the temp folder).

    Raises:
        InvalidAgentDefinitionError: an argument is invalid.
    """
    if not isinstance(url, str) or not url.strip():
        raise InvalidAgentDefinitionError(f"git() url must be a repository URL, not {url!r}")
    if url.startswith("-") or "\n" in url:
        raise InvalidAgentDefinitionError(f"git() url {url!r} is not a repository URL")
    if not isinstance(ref, str) or not ref or ref.startswith("-") or any(c in ref for c in " ~^:?*[\\\n"):
        raise InvalidAgentDefinitionError(
            f"git() ref {ref!r} is not a branch, tag or commit name (e.g. 'main', 'v1.2', a commit id)"
        )
    if not isinstance(path, str) or path.startswith(("/", "-")) or ".." in path.split("/"):
        raise InvalidAgentDefinitionError(
            f"git() path {path!r} must be a folder relative to the repository root, e.g. 'docs'"
        )
    if isinstance(extensions, str):
        raise InvalidAgentDefinitionError(
            f"git() extensions must be a list of suffixes such as ['.md'], not the string {extensions!r}"
        )
    suffixes = tuple(extensions)
    if not suffixes or any(not isinstance(s, str) or not s.startswith(".") or len(s) < 2 for s in suffixes):
        raise InvalidAgentDefinitionError(
            f"git() extensions {suffixes!r} are invalid: name suffixes with their dot, e.g. '.md'"
        )
    if trusted is not None and not isinstance(trusted, bool):
        raise InvalidAgentDefinitionError("git() trusted must be True, False or None")
    return GitSource(
        url=url,
        ref=ref,
        path=path.strip("/"),
        extensions=tuple(s.lower() for s in suffixes),
        trusted=trusted,
        cache=Path(os.path.abspath(os.fspath(cache))) if cache is not None else None,
    )
