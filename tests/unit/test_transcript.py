"""The transcript delta: digests chain, the cache serves only an exact prefix."""

from chamvi._transcript import EMPTY_DIGEST, TranscriptCache, chain_digest
from chamvi.models import Message

A = Message(role="user", content="a")
B = Message(role="assistant", content="b")


def test_digests_chain_so_equal_digests_mean_equal_transcripts() -> None:
    assert chain_digest(chain_digest(EMPTY_DIGEST, [A]), [B]) == chain_digest(EMPTY_DIGEST, [A, B])
    assert chain_digest(EMPTY_DIGEST, [A, B]) != chain_digest(EMPTY_DIGEST, [B, A])


def test_the_cache_serves_a_prefix_only_when_count_and_digest_match() -> None:
    cache = TranscriptCache(max_runs=2)
    digest = chain_digest(EMPTY_DIGEST, [A])
    cache.store("r1", [A], digest)
    assert cache.prefix("r1", 1, digest) == [A]
    assert cache.prefix("r1", 1, "other") is None
    assert cache.prefix("r1", 2, digest) is None


def test_the_cache_forgets_the_least_recently_used_run() -> None:
    cache = TranscriptCache(max_runs=2)
    for run in ("r1", "r2", "r3"):
        cache.store(run, [A], "d")
    assert cache.prefix("r1", 1, "d") is None
    assert cache.prefix("r3", 1, "d") == [A]
