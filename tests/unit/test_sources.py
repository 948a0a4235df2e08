"""Sources: folder() reads a tree safely and in order; custom sources and their items are checked."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import socket
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from chamvi.errors import InvalidAgentDefinitionError, InvalidDocumentError
from chamvi.knowledge import sources
from chamvi.knowledge.documents import Document, content_hash, validate_item
from chamvi.knowledge.sources import (
    MAX_FILE_BYTES,
    CustomSource,
    FolderSource,
    Source,
    SourceContext,
    define_source,
    first_heading,
    folder,
)

SECRET = "SECRET-CONTENT-never-in-a-message"


class Read:
    """Everything one read of a source produced."""

    def __init__(self) -> None:
        self.errors: list[str] = []
        self.incomplete_calls: list[str] = []
        self.ctx = SourceContext(on_error=self.errors.append, incomplete=self.incomplete_calls.append)
        self.items: list[Any] = []

    @property
    def ids(self) -> list[str]:
        return [item.id for item in self.items]


async def read(source: Source, reader: Read | None = None) -> Read:
    reader = reader or Read()
    async for item in source.documents(reader.ctx):
        reader.items.append(item)
    return reader


def write(path: Path, text: str = "text") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- folder(): order, filters, titles ---------------------------------------------------------------


async def test_folder_yields_matching_files_in_path_order_and_skips_dot_entries(tmp_path: Path) -> None:
    for name in ["b.md", "a.md", "a-b.md", "a/x.md", "a/b/deep.txt", "c.mdx", "guide.markdown", "UPPER.MD"]:
        write(tmp_path / name)
    for name in [".hidden.md", ".git/config.md", "a/.draft.md", "image.png", "notes.rst", "a/b/data.json"]:
        write(tmp_path / name)

    result = await read(folder(tmp_path))

    assert result.ids == [
        "UPPER.MD",
        "a-b.md",
        "a.md",
        "a/b/deep.txt",
        "a/x.md",
        "b.md",
        "c.mdx",
        "guide.markdown",
    ]
    assert result.ids == sorted(result.ids)  # "a-b.md" < "a.md" < "a/...": sorted by the whole path
    assert result.errors == []
    assert not result.ctx.is_incomplete


async def test_folder_documents_carry_path_source_content_and_title(tmp_path: Path) -> None:
    write(tmp_path / "guides/setup.md", "Intro line\n\n# Setting up\n\nSteps.")
    write(tmp_path / "plain.txt", "no heading here\n#not-a-heading")
    write(tmp_path / "bom.md", "\ufeff# With a BOM\n")

    docs = {d.id: d for d in (await read(folder(tmp_path))).items}

    setup = docs["guides/setup.md"]
    assert isinstance(setup, Document)
    assert (setup.source, setup.title, setup.content) == (
        "guides/setup.md",
        "Setting up",
        "Intro line\n\n# Setting up\n\nSteps.",
    )
    assert docs["plain.txt"].title == "plain.txt"  # no heading: the file name
    assert docs["bom.md"].title == "With a BOM"
    assert docs["bom.md"].content == "# With a BOM\n"


@pytest.mark.parametrize(
    ("text", "title"),
    [
        ("```\n# inside a fence\n```\n# Outside", "Outside"),
        ("~~~md\n# inside\n~~~\n\n# After tildes", "After tildes"),
        ("````\n```\n# still inside\n```\n````\n# Real", "Real"),
        ("```\n# unclosed fence runs to the end", None),
        ("## Second level\n# First level", "First level"),
        ("#Hashtag\n# Heading #", "Heading"),
        ("   # Indented three\n", "Indented three"),
        ("    # four spaces is code\n", None),
        ("# C#\n", "C#"),
        ("#\n# \n# Named", "Named"),
    ],
)
def test_title_is_the_first_level_one_heading_outside_fences(text: str, title: str | None) -> None:
    assert first_heading(text) == title


async def test_folder_extensions_can_be_chosen(tmp_path: Path) -> None:
    write(tmp_path / "a.rst")
    write(tmp_path / "b.md")
    result = await read(folder(tmp_path, extensions=[".rst"]))
    assert result.ids == ["a.rst"]


def test_folder_path_is_resolved_against_the_working_directory_when_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "handbook").mkdir()
    monkeypatch.chdir(tmp_path)
    source = folder("./handbook")
    monkeypatch.chdir("/")
    assert source.path == tmp_path / "handbook"
    assert source.path.is_absolute()
    source.check()


# --- folder(): entries that are skipped and reported ---------------------------------------------


async def test_symbolic_links_are_reported_and_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.md", SECRET)
    root = tmp_path / "root"
    write(root / "real.md")
    (root / "to-file.md").symlink_to(outside / "secret.md")
    (root / "to-dir").symlink_to(outside, target_is_directory=True)
    (root / "dangling.md").symlink_to(tmp_path / "missing.md")
    (root / "picture.png").symlink_to(outside / "secret.md")  # not a candidate: ignored quietly

    result = await read(folder(root))

    assert result.ids == ["real.md"]
    assert result.errors == [
        "skipped 'dangling.md': a symbolic link (never followed)",
        "skipped 'to-dir': a symbolic link (never followed)",
        "skipped 'to-file.md': a symbolic link (never followed)",
    ]
    assert not result.ctx.is_incomplete  # so the pass deletes them if they were indexed


@pytest.mark.timeout(10)  # opening a FIFO would block forever
async def test_a_fifo_and_a_socket_are_reported_and_never_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "a.md")
    os.mkfifo(tmp_path / "pipe.md")
    monkeypatch.chdir(tmp_path)  # a socket path must stay short
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind("sock.md")
        result = await read(folder(tmp_path))
    finally:
        server.close()

    assert result.ids == ["a.md"]
    assert result.errors == [
        "skipped 'pipe.md': not a regular file",
        "skipped 'sock.md': not a regular file",
    ]
    assert not result.ctx.is_incomplete


async def test_a_file_over_one_mebibyte_is_reported_and_skipped(tmp_path: Path) -> None:
    write(tmp_path / "big.md", "x" * (MAX_FILE_BYTES + 1))
    write(tmp_path / "limit.md", "y" * MAX_FILE_BYTES)

    result = await read(folder(tmp_path))

    assert result.ids == ["limit.md"]
    assert result.errors == [f"skipped 'big.md': over 1 MiB ({MAX_FILE_BYTES + 1} bytes)"]


async def test_a_file_that_is_not_utf8_is_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "latin1.md").write_bytes("caf\u00e9".encode("latin-1"))
    write(tmp_path / "ok.md", "caf\u00e9")
    os.close(os.open(bytes(tmp_path) + b"/name-\xff.md", os.O_CREAT | os.O_WRONLY))

    result = await read(folder(tmp_path))

    assert result.ids == ["ok.md"]
    assert result.errors == [
        "skipped 'latin1.md': not UTF-8",
        "skipped 'name-\\udcff.md': its path is not UTF-8",
    ]


async def test_a_relative_path_over_255_characters_is_reported_and_skipped(tmp_path: Path) -> None:
    # each name stays under the OS limit of 255 bytes; the relative path does not
    deep = tmp_path / ("d" * 120) / ("e" * 120)
    write(deep / "short.md")  # 120 + 1 + 120 + 1 + 8 = 250 characters: kept
    write(deep / "longer-name.md")  # 256 characters: skipped

    result = await read(folder(tmp_path))

    assert result.ids == [f"{'d' * 120}/{'e' * 120}/short.md"]
    assert len(result.errors) == 1
    assert result.errors[0].startswith("skipped 'dddd")
    assert result.errors[0].endswith("...: its relative path has 256 characters, over 255")
    assert not result.ctx.is_incomplete


# --- folder(): failures that make the read incomplete ---------------------------------------------
# The tests run as root, for whom chmod 000 denies nothing. So the failure is injected at the one
# system call that would fail for another user: os.open of the folder (to list it) or of the file (to
# read it), each opened by name in its parent, for that one name only, raising the PermissionError the
# kernel raises. Everything else is real.


async def test_an_unlistable_folder_is_reported_and_marks_the_read_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "a.md")
    write(tmp_path / "locked/inside.md")
    write(tmp_path / "z.md")
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == "locked" and flags & os.O_DIRECTORY:
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "locked")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    result = await read(folder(tmp_path))

    assert result.ids == ["a.md", "z.md"]
    message = "skipped 'locked': the folder cannot be listed (Permission denied); the read is incomplete"
    assert result.errors == [message]
    assert result.ctx.is_incomplete
    assert result.ctx.reasons == [message]
    assert result.incomplete_calls == [message]  # the callback given to the context is told too


async def test_an_unreadable_file_is_reported_and_marks_the_read_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "a.md")
    write(tmp_path / "b.md", SECRET)
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fspath(path) == "b.md":
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), "b.md")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    result = await read(folder(tmp_path))

    assert result.ids == ["a.md"]
    assert result.errors == [
        "skipped 'b.md': the file cannot be read (Permission denied); the read is incomplete"
    ]
    assert result.ctx.is_incomplete


async def test_a_cancelled_read_stops_and_is_incomplete(tmp_path: Path) -> None:
    for n in range(5):
        write(tmp_path / f"{n}.md")
    reader = Read()
    reader.ctx.cancellation.set()
    result = await read(folder(tmp_path), reader)
    assert result.items == []
    assert result.ctx.reasons == ["the read was cancelled"]


async def test_the_walk_is_lazy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for n in range(300):
        write(tmp_path / f"{n:03}.md")
    opened: list[str] = []
    real_open = os.open

    def open_(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.append(os.fspath(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    documents = folder(tmp_path).documents(SourceContext())
    assert isinstance(documents, AsyncIterator)
    first = await anext(documents)
    await documents.aclose()  # type: ignore[attr-defined]
    assert first.id == "000.md"
    assert len(opened) < 100  # one batch read ahead, not the whole tree


async def test_a_file_is_racy_within_the_window_before_its_folder_is_listed_not_before_the_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sources, "RACY_SECONDS", 0.3)
    write(tmp_path / "a" / "old.md")
    time.sleep(0.4)
    write(tmp_path / "b" / "new.md")  # written just before the pass starts
    asked: list[list[tuple[str, str]]] = []

    async def unchanged(versions: list[tuple[str, str]]) -> set[str]:
        asked.append(versions)
        await asyncio.sleep(0.4)  # a slow pass: b/ is listed after the window of new.md has passed
        return set()

    reader = Read()
    reader.ctx.unchanged = unchanged
    result = await read(folder(tmp_path), reader)
    assert [d.id for d in result.items] == ["a/old.md", "b/new.md"]
    assert [[rel for rel, _ in versions] for versions in asked] == [["a/old.md"], ["b/new.md"]]


# --- folder(): configuration ------------------------------------------------------------------------


async def test_a_missing_or_non_directory_path_is_a_configuration_error(tmp_path: Path) -> None:
    missing = folder(tmp_path / "nope")
    with pytest.raises(InvalidAgentDefinitionError) as caught:
        missing.check()
    assert caught.value.message == f"folder() path {str(tmp_path / 'nope')!r} is not a directory"
    with pytest.raises(InvalidAgentDefinitionError, match="is not a directory"):
        await read(missing)
    with pytest.raises(InvalidAgentDefinitionError, match="is not a directory"):
        folder(write(tmp_path / "file.md")).check()


@pytest.mark.parametrize(
    ("extensions", "match"),
    [(".md", "not the string"), ([], "is empty"), (["md"], "with their dot"), (["."], "with their dot")],
)
def test_bad_extensions_are_refused(tmp_path: Path, extensions: Any, match: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=match):
        folder(tmp_path, extensions=extensions)


def test_folder_is_a_trusted_by_default_source(tmp_path: Path) -> None:
    source = folder(tmp_path)
    assert isinstance(source, FolderSource)
    assert isinstance(source, Source)
    assert (source.kind, source.trusted) == ("folder", None)
    assert folder(tmp_path, trusted=False).trusted is False


# --- define_source() --------------------------------------------------------------------------------


async def test_a_custom_source_with_a_context_parameter_receives_the_context() -> None:
    seen: list[SourceContext] = []

    async def documents(ctx: SourceContext) -> AsyncIterator[object]:
        seen.append(ctx)
        ctx.on_error("one page was odd")
        yield {"id": "a", "content": "A"}
        ctx.incomplete("page 2 answered 503")

    source = define_source(kind="releases", trusted=False, documents=documents)
    result = await read(source)

    assert isinstance(source, CustomSource)
    assert isinstance(source, Source)
    assert (source.kind, source.trusted) == ("releases", False)
    assert seen == [result.ctx]
    assert result.items == [{"id": "a", "content": "A"}]
    assert result.errors == ["one page was odd"]
    assert result.ctx.reasons == ["page 2 answered 503"]


async def test_a_custom_source_may_leave_the_context_out() -> None:
    async def documents() -> AsyncIterator[object]:
        yield Document(id="a", content="A")

    source = define_source(documents=documents)
    result = await read(source)
    assert source.kind == "custom"
    assert source.trusted is None
    assert result.ids == ["a"]


async def test_a_custom_source_may_return_any_async_iterable() -> None:
    class Items:
        def __aiter__(self) -> AsyncIterator[object]:
            return self.generate()

        async def generate(self) -> AsyncIterator[object]:
            yield {"id": "x", "content": "X"}

    result = await read(define_source(documents=lambda ctx: Items()))
    assert result.items == [{"id": "x", "content": "X"}]


async def test_a_cancelled_custom_read_stops_and_is_incomplete() -> None:
    async def documents(ctx: SourceContext) -> AsyncIterator[object]:
        yield {"id": "a", "content": "A"}
        ctx.cancellation.set()
        yield {"id": "b", "content": "B"}

    result = await read(define_source(documents=documents))
    assert result.items == [{"id": "a", "content": "A"}]
    assert result.ctx.reasons == ["the read was cancelled"]


async def test_documents_that_is_a_coroutine_is_a_configuration_error() -> None:
    async def documents(ctx: SourceContext) -> list[object]:
        return [{"id": "a", "content": "A"}]

    source = define_source(kind="oops", documents=documents)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="returned a coroutine"):
        await read(source)


def test_define_source_refuses_mistakes() -> None:
    async def ok() -> AsyncIterator[object]:
        yield {}

    def sync_generator() -> Iterator[object]:
        yield {}

    async def two(ctx: SourceContext, other: int) -> AsyncIterator[object]:
        yield {}

    async def async_check() -> None:
        pass

    with pytest.raises(InvalidAgentDefinitionError, match="kind must be a non-empty string"):
        define_source(kind="", documents=ok)
    with pytest.raises(InvalidAgentDefinitionError, match="plain generator"):
        define_source(documents=sync_generator)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="one parameter"):
        define_source(documents=two)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="not async"):
        define_source(documents=ok, check=async_check)  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="must be an async generator"):
        define_source(documents="nope")  # type: ignore[arg-type]
    with pytest.raises(InvalidAgentDefinitionError, match="trusted"):
        define_source(documents=ok, trusted="yes")  # type: ignore[arg-type]


def test_a_custom_check_reports_a_configuration_error() -> None:
    def check() -> None:
        raise InvalidAgentDefinitionError("releases source needs RELEASES_URL")

    async def documents() -> AsyncIterator[object]:
        yield {}

    source = define_source(kind="releases", check=check, documents=documents)
    with pytest.raises(InvalidAgentDefinitionError, match="RELEASES_URL"):
        source.check()
    define_source(documents=documents).check()  # no check: nothing to say


# --- items a source yields ----------------------------------------------------------------------------


def test_a_valid_item_becomes_a_document() -> None:
    doc = validate_item(
        {"id": "faq-1", "content": "Answer.", "title": "Q?", "source": "db", "metadata": {"n": [1, "x"]}}
    )
    assert doc == Document(id="faq-1", content="Answer.", title="Q?", source="db", metadata={"n": [1, "x"]})
    assert validate_item(doc) == doc
    assert validate_item(Document(id="a", content="")) == Document(id="a", content="")


class Opaque:
    pass


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"content": SECRET}, "a document has no id: give every document a stable, non-empty string id"),
        ({"id": "", "content": SECRET}, "a document has an empty id: ids are 1 to 255 characters"),
        ({"id": 7, "content": SECRET}, "document id of type int is not a string"),
        ({"id": "a\x00b", "content": SECRET}, "document id 'a\\x00b' contains a NUL character"),
        ({"id": "doc-1"}, "document 'doc-1' has no content"),
        ({"id": "doc-1", "content": b"bytes"}, "document 'doc-1': content must be a string, not bytes"),
        ({"id": "doc-1", "content": None}, "document 'doc-1': content must be a string, not NoneType"),
        ({"id": "doc-1", "content": "\ud800" + SECRET}, "document 'doc-1': content is not valid Unicode"),
        (
            {"id": "doc-1", "content": SECRET, "title": 3},
            "document 'doc-1': title must be a string or None, not int",
        ),
        (
            {"id": "doc-1", "content": SECRET, "source": ["u"]},
            "document 'doc-1': source must be a string or None, not list",
        ),
        ({"id": "doc-1", "content": SECRET, "body": "x"}, "document 'doc-1' has unknown field(s) 'body'"),
        (["doc-1", SECRET], "a source yielded a list: yield a Document or a mapping"),
    ],
)
def test_a_bad_item_is_refused_by_its_id_never_its_content(item: object, message: str) -> None:
    with pytest.raises(InvalidDocumentError) as caught:
        validate_item(item)
    assert caught.value.code == "invalid_document"
    assert caught.value.message.startswith(message)
    assert "SECRET" not in caught.value.message


def test_a_long_id_is_refused_and_named_in_80_characters() -> None:
    with pytest.raises(InvalidDocumentError) as caught:
        validate_item({"id": "x" * 256, "content": SECRET})
    message = caught.value.message
    named = message.removeprefix("document id ").split(" has ")[0]
    assert len(named) == 80 and named.startswith("'xxx") and named.endswith("...")
    assert message.endswith("has 256 characters: ids are 1 to 255 characters")
    assert validate_item({"id": "x" * 255, "content": ""}).id == "x" * 255


@pytest.mark.parametrize(
    "metadata",
    [
        ["a", "list"],
        {"tags": {"a", "b"}},
        {"when": Opaque()},
        {1: "int key"},
        {"nested": {2: "int key"}},
        {"pair": (1, 2)},
        {"nan": float("nan")},
        "a string",
    ],
)
def test_metadata_must_be_a_plain_json_object(metadata: object) -> None:
    with pytest.raises(InvalidDocumentError) as caught:
        validate_item({"id": "doc-1", "content": SECRET, "metadata": metadata})
    assert caught.value.message.startswith("document 'doc-1': metadata must be a plain JSON object")
    assert "SECRET" not in caught.value.message


def test_metadata_is_copied_so_later_changes_do_not_leak_in() -> None:
    metadata: dict[str, Any] = {"tags": ["a"]}
    doc = validate_item({"id": "a", "content": "", "metadata": metadata})
    metadata["tags"].append("b")
    assert doc.metadata == {"tags": ["a"]}


def test_the_content_hash_covers_content_title_source_and_metadata() -> None:
    base = Document(id="a", content="text", title="T", source="s", metadata={"x": 1, "y": 2})
    same = Document(id="b", content="text", title="T", source="s", metadata={"y": 2, "x": 1})
    assert content_hash(base) == content_hash(same)  # the id and key order do not count
    changes = [
        Document(id="a", content="text!", title="T", source="s", metadata={"x": 1, "y": 2}),
        Document(id="a", content="text", title="T2", source="s", metadata={"x": 1, "y": 2}),
        Document(id="a", content="text", title="T", source="s2", metadata={"x": 1, "y": 2}),
        Document(id="a", content="text", title="T", source="s", metadata={"x": 1}),
        Document(id="a", content="text", title=None, source="s", metadata={"x": 1, "y": 2}),
    ]
    hashes = {content_hash(d) for d in changes}
    assert len(hashes) == len(changes) and content_hash(base) not in hashes


async def test_a_pass_can_report_bad_custom_items_by_id_and_keep_the_rest() -> None:
    async def documents() -> AsyncIterator[object]:
        yield {"id": "good", "content": "fine"}
        yield {"id": "bad", "content": 42}
        yield {"id": "x" * 300, "content": SECRET}
        yield {"id": "meta", "content": SECRET, "metadata": {"s": {1}}}

    reader = Read()
    kept: list[Document] = []
    async for raw in define_source(documents=documents).documents(reader.ctx):
        try:
            kept.append(validate_item(raw))
        except InvalidDocumentError as error:
            reader.ctx.on_error(error.message)
    assert [d.id for d in kept] == ["good"]
    assert len(reader.errors) == 3
    assert reader.errors[0].startswith("document 'bad'")
    assert reader.errors[2].startswith("document 'meta'")
    assert not any("SECRET" in e for e in reader.errors)


def test_source_context_defaults_work_outside_a_pass() -> None:
    ctx = SourceContext()
    ctx.on_error("logged, not raised")
    ctx.incomplete("why")
    assert ctx.is_incomplete and ctx.reasons == ["why"]
    assert not ctx.cancellation.is_set()


# --- folder(): a tree changed while it is read ------------------------------------------------------
# A person (or an attacker) can swap a sub-folder for a link at any moment. The swap is made for real
# from a hook on os.scandir, right after the walk's Nth listing: after the root's listing (between the
# walk seeing 'sub' as a folder and listing it), or after sub's listing (before its file is read).


@pytest.mark.parametrize("after_listings", [1, 2])
async def test_a_folder_swapped_for_a_link_mid_walk_never_leads_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, after_listings: int
) -> None:
    write(tmp_path / "outside" / "page.md", SECRET)
    root = tmp_path / "root"
    write(root / "a.md", "inside a")
    write(root / "sub" / "page.md", "inside sub")
    listings = 0
    real_scandir = os.scandir

    def scandir(path: Any = ".") -> Any:
        nonlocal listings
        entries = list(real_scandir(path))
        listings += 1
        if listings == after_listings:
            (root / "sub").rename(tmp_path / "sub-moved-away")
            (root / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
        return contextlib.nullcontext(entries)

    monkeypatch.setattr(os, "scandir", scandir)
    result = await read(folder(root))

    assert all(SECRET not in item.content for item in result.items)
    if after_listings == 1:
        assert result.ids == ["a.md"]
        assert result.errors == ["skipped 'sub': a symbolic link (never followed)"]
    else:  # the folder was opened before the swap: its own file is read, where it now is
        assert [(d.id, d.content) for d in result.items] == [
            ("a.md", "inside a"),
            ("sub/page.md", "inside sub"),
        ]
