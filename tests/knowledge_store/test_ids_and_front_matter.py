"""Ids, links in content, and the front-matter reader and writer: no store needed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chamvi.knowledge_store import InvalidPageError, linked_ids, parse_id, slugify
from chamvi.knowledge_store._frontmatter import FrontMatterError, render, split
from chamvi.knowledge_store._ids import malformed_links, map_links
from chamvi.knowledge_store._types import FieldValue


def test_ids_are_type_slash_slug_in_lowercase_runs() -> None:
    assert parse_id("concept/refund-policy") == ("concept", "refund-policy")
    assert parse_id("q3/2024-report") == ("q3", "2024-report")
    for bad in ("concept", "concept/", "/x", "Concept/x", "concept/a--b", "a/b/c", "concept/a_b", ""):
        with pytest.raises(InvalidPageError, match="is not a page id"):
            parse_id(bad)
    with pytest.raises(InvalidPageError, match=r"e\.g\. concept/refund-policy"):
        parse_id("Concept/Refund Policy")


def test_slugify_suggests_a_slug() -> None:
    assert slugify("Refund Policy (EU) — 2024") == "refund-policy-eu-2024"
    assert slugify("Crème brûlée") == "creme-brulee"
    assert slugify("!!!") == ""


def test_linked_ids_reads_page_links_outside_code_once_each() -> None:
    content = (
        "See [a](concept/a) and [b](entity/b#history), again [a](concept/a).\n"
        "Not links: ![img](concept/img) `[c](concept/c)` [web](https://x.org/a/b) [file](docs/x.md)\n"
        "```\n[d](concept/d)\n```\n"
        '[e](<concept/e>) [f](concept/f "a title")\n'
    )
    assert linked_ids(content) == ["concept/a", "entity/b", "concept/e", "concept/f"]


def test_malformed_links_are_targets_meant_as_ids() -> None:
    content = "[a](Concept/Refunds) [b](a/b/c) [ok](concept/ok) [web](https://x/y) [f](docs/x.md) [r](../x)"
    assert malformed_links(content) == ["Concept/Refunds", "a/b/c"]


def test_map_links_keeps_text_titles_and_anchors() -> None:
    out = map_links('[a](concept/a#x "t") [b](https://b)', lambda t: "X" if t.startswith("concept") else None)
    assert out == '[a](X "t") [b](https://b)'


def test_front_matter_reads_the_subset_pages_use() -> None:
    text = (
        "---\n"
        "title: Refunds: the rules\n"  # a plain value may hold ': ' after the first
        'quoted: "a \\"b\\" c"\n'
        "single: 'it''s'\n"
        "tags: [a, 'b, c', \"d\"]\n"
        "list:\n  - one\n  - two\n"
        "empty:\n"
        "count: 3 # a comment\n"
        "# a comment line\n"
        "---\n"
        "Body\n"
    )
    fields, body = split(text)
    assert fields == {
        "title": "Refunds: the rules",
        "quoted": 'a "b" c',
        "single": "it's",
        "tags": ["a", "b, c", "d"],
        "list": ["one", "two"],
        "empty": "",
        "count": "3",
    }
    assert body == "Body\n"
    assert split("No front matter\n") == (None, "No front matter\n")


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("---\ntitle: x\n", "line 1: the front matter is never closed"),
        ("---\nauthor:\n  name: Ada\n---\n", "line 3: expected 'key: value'"),
        ("---\na: 1\na: 2\n---\n", "line 3: 'a' is given twice"),
        ("---\na: {b: 1}\n---\n", "line 2: '{b: 1}' uses YAML this reader does not accept"),
        ("---\na: [b, [c]]\n---\n", "line 2: nested lists and maps are not accepted"),
        ('---\na: "open\n---\n', "line 2: unreadable quoted string"),
    ],
)
def test_front_matter_it_does_not_accept_is_refused_with_its_line(text: str, problem: str) -> None:
    with pytest.raises(FrontMatterError) as refused:
        split(text)
    assert str(refused.value).startswith(problem)


# any text at all, built from pieces that include the ones YAML gives a meaning, so they meet often
_yaml_pieces = ["\t#", " #", ": ", "- ", "'", '"', "[", ",", "\n", "\r", "\u2028", "---"]
text = st.lists(st.text(max_size=6) | st.sampled_from(_yaml_pieces), max_size=8).map("".join)
key = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)


@given(st.dictionaries(key, text | st.lists(text, max_size=4)), text)
def test_front_matter_round_trips_every_string_it_writes(fields: dict, body: str) -> None:
    parsed, rest = split(render(fields) + body)
    assert parsed == fields and rest == body


@pytest.mark.parametrize("value", ["Budget\t#2024 review", "a\t# b", "tab\t#", "x \t #y", "line\u2028#break"])
def test_a_whitespace_then_hash_inside_a_value_is_kept(value: str) -> None:
    fields: dict[str, FieldValue] = {"title": value, "tags": [value]}
    assert split(render(fields))[0] == fields
