"""The compact set of ids a pass keeps to tell what is gone."""

from __future__ import annotations

from chamvi.knowledge._seen import SeenIds


def test_every_id_added_is_found_across_merges_and_others_are_not() -> None:
    seen = SeenIds()
    ids = [f"docs/{i:06d}.md" for i in range(20_000)]  # several merges into the sorted array
    assert all(seen.add(i) for i in ids)
    assert len(seen) == 20_000
    assert all(i in seen for i in ids)
    assert not any(f"other/{i}.md" in seen for i in range(20_000))


def test_an_id_added_twice_is_reported_the_second_time_before_and_after_a_merge() -> None:
    seen = SeenIds()
    assert seen.add("a.md") and not seen.add("a.md")
    for i in range(10_000):
        seen.add(f"{i}.md")
    assert not seen.add("a.md") and not seen.add("9999.md")
    assert len(seen) == 10_001
