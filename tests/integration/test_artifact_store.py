"""The artifact store on its two production paths: a local folder, and S3 against a real S3-compatible
server (moto's, started here on loopback), through the same obstore client."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from chamvi import is_artifact_media_type
from chamvi.artifacts import ArtifactStore, RunArtifacts, artifact_id, open_artifact_store, parse_artifact_id
from chamvi.errors import ArtifactNotFoundError, ChamviError, ChamviValidationError, InvalidInputError
from chamvi.settings import Settings
from tests.support.s3_server import S3Server


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    with S3Server() as server:
        yield server


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> ArtifactStore:
    if request.param == "local":
        return ArtifactStore.local(tmp_path / "artifacts")
    s3: S3Server = request.getfixturevalue("s3")
    return ArtifactStore.open(f"s3://{s3.bucket}/{tmp_path.name}", **s3.config)


async def test_put_then_read_list_and_info_answer_the_same_file(store: ArtifactStore) -> None:
    data = b"\x89PNG fake"
    stored = await store.put("run-a", 0, "Image/PNG", data, "dot.png")
    await store.put("run-a", 1, "text/plain", b"second")
    await store.put("run-b", 0, "text/plain", b"other run")

    assert (stored.id, stored.media_type, stored.size) == ("run-a.0000", "image/png", len(data))
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    assert await store.read("run-a.0000") == data
    assert await store.info("run-a.0000") == stored
    assert [a.id for a in await store.list("run-a")] == ["run-a.0000", "run-a.0001"]
    assert await store.list("run-none") == []


async def test_putting_the_same_id_again_keeps_one_file(store: ArtifactStore) -> None:
    await store.put("run-a", 0, "text/plain", b"first attempt")
    await store.put("run-a", 0, "text/plain", b"retried attempt")

    [only] = await store.list("run-a")
    assert await store.read(only.id) == b"retried attempt"


async def test_a_missing_artifact_is_artifact_not_found_naming_it(store: ArtifactStore) -> None:
    with pytest.raises(ArtifactNotFoundError, match=r"artifact 'run-a.0007' is not in the artifact store"):
        await store.read("run-a.0007")


async def test_a_run_id_with_slashes_and_dots_stays_one_folder(store: ArtifactStore) -> None:
    run_id = "team/a.b c"
    await store.put(run_id, 0, "text/plain", b"x")

    assert parse_artifact_id(artifact_id(run_id, 0)) == (run_id, 0)
    assert [a.id for a in await store.list(run_id)] == ["team/a.b c.0000"]
    assert await store.list("team") == []


async def test_ctx_artifacts_numbers_on_from_the_run_and_refuses_another_runs_file() -> None:
    store = ArtifactStore.memory()
    await store.put("run-a", 0, "text/plain", b"attachment")
    await store.put("run-a", 1, "text/plain", b"left by an interrupted attempt")
    await store.put("run-b", 0, "text/plain", b"not yours")
    artifacts = RunArtifacts(store, "run-a", base=1)

    put = await artifacts.put("text/csv", "a,b\n", filename="rows.csv")

    assert put.id == "run-a.0001"
    assert await store.read("run-a.0001") == b"a,b\n"
    assert [a.id for a in await artifacts.list()] == ["run-a.0000", "run-a.0001"]
    with pytest.raises(InvalidInputError, match=r"belongs to run 'run-b', not to this run"):
        await artifacts.get("run-b.0000")


@pytest.mark.parametrize(
    ("media_type", "filename", "error", "problem"),
    [
        ("png", None, ChamviValidationError, r"media type 'png' is invalid: write it as type/subtype"),
        (
            "text/plain; charset=utf-8",
            None,
            ChamviValidationError,
            r"has parameters: .* type/subtype only, write 'text/plain'",
        ),
        ("text/plain", "../etc/passwd", InvalidInputError, r"file name '../etc/passwd' is invalid"),
    ],
)
async def test_a_bad_media_type_or_file_name_is_refused_naming_it(
    media_type: str, filename: str | None, error: type[ChamviError], problem: str
) -> None:
    with pytest.raises(error, match=problem):
        await ArtifactStore.memory().put("run-a", 0, media_type, b"x", filename)


def test_the_artifact_media_type_rule_takes_type_and_subtype_only() -> None:
    assert all(map(is_artifact_media_type, ["image/png", "application/vnd.api+json", "Text/Plain"]))
    refused = ["png", "text/plain; charset=utf-8", "text/plain;", "text /plain", "", None, 5, "a/b/c"]
    assert not any(map(is_artifact_media_type, refused))


def test_a_malformed_artifact_id_says_what_ids_look_like() -> None:
    with pytest.raises(InvalidInputError, match=r"artifact id 'run-a' is malformed: .*'<run_id>.0000'"):
        parse_artifact_id("run-a")


def test_settings_choose_the_data_folder_unless_an_artifacts_url_is_set(tmp_path: Path) -> None:
    local = open_artifact_store(Settings(data=tmp_path))
    remote = open_artifact_store(Settings(data=tmp_path, artifacts_url="memory:///"))

    assert local.location == str(tmp_path / "artifacts")
    assert remote.location == "memory:///"
    assert Settings.from_env({"CHAMVI_ATTACHMENT_MAX_BYTES": "1024"}).attachment_max_bytes == 1024
    with pytest.raises(Exception, match=r"CHAMVI_ATTACHMENT_MAX_BYTES='lots' is not a positive number"):
        Settings.from_env({"CHAMVI_ATTACHMENT_MAX_BYTES": "lots"})


async def test_a_put_redone_in_a_folder_removes_what_an_interrupted_one_left_and_nothing_else(
    tmp_path: Path,
) -> None:
    store = ArtifactStore.open(f"file://{tmp_path}")  # a folder by url: the same cleaning
    folder = tmp_path / "run-a"
    folder.mkdir()
    for name in ("0000#1", "0000#7", "0000.json#2", "0001#1"):  # obstore's names for a file being written
        (folder / name).write_bytes(b"partial")
    await store.put("run-a", 0, "text/plain", b"whole")
    assert sorted(p.name for p in folder.iterdir()) == ["0000", "0000.json", "0001#1"]
    assert await store.read("run-a.0000") == b"whole"
