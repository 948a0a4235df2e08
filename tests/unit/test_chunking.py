"""The chunker packs paragraphs whole, keeps headings with their text and overlaps passages."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from chamvi.knowledge.chunking import CHUNKER_VERSION, MAX_CHARS, OVERLAP, chunk


def words(count: int, start: int = 0) -> str:
    """A sentence of distinct words, so a test can tell where every word went."""
    return " ".join(f"w{i}" for i in range(start, start + count)) + "."


def paragraph(size: int, tag: str) -> str:
    """A paragraph of about ``size`` characters whose words all carry ``tag``."""
    out = []
    length = 0
    i = 0
    while length < size:
        word = f"{tag}{i}"
        out.append(word)
        length += len(word) + 1
        i += 1
    return " ".join(out)[: size - 1] + "."


def shared_prefix_overlap(previous: str, following: str) -> int:
    """The longest end of ``previous`` that ``following`` starts with."""
    for size in range(min(len(previous), len(following)), 0, -1):
        if previous.endswith(following[:size]):
            return size
    return 0


def test_defaults_match_the_seed() -> None:
    assert (MAX_CHARS, OVERLAP, CHUNKER_VERSION) == (2000, 200, 1)


@pytest.mark.parametrize("text", ["", " ", "\n\n\n", " \t\n \r\n"])
def test_empty_or_blank_text_gives_no_passage(text: str) -> None:
    assert chunk(text) == []


def test_a_short_text_is_one_passage_without_surrounding_blank_lines() -> None:
    assert chunk("\n\nHello there.\n\nSecond paragraph.\n\n") == ["Hello there.\n\nSecond paragraph."]


def test_windows_line_endings_split_paragraphs_too() -> None:
    assert chunk("One.\r\n\r\nTwo.") == ["One.\n\nTwo."]


def test_paragraphs_are_packed_whole_up_to_the_limit() -> None:
    paragraphs = [paragraph(600, f"p{n}x") for n in range(10)]
    passages = chunk("\n\n".join(paragraphs))
    assert len(passages) > 1
    for passage in passages:
        assert 0 < len(passage) <= MAX_CHARS
    for text in paragraphs:  # each paragraph appears whole in some passage
        assert any(text in passage for passage in passages)


def test_consecutive_passages_overlap_by_about_the_overlap() -> None:
    text = "\n\n".join(paragraph(90, f"p{n}x") for n in range(80))
    passages = chunk(text)
    assert len(passages) >= 3
    for previous, following in itertools.pairwise(passages):
        shared = shared_prefix_overlap(previous, following)
        assert 90 <= shared <= OVERLAP
        # short paragraphs are carried whole
        assert set(following[:shared].split("\n\n")) <= set(text.split("\n\n"))


def test_the_end_of_a_long_last_paragraph_is_carried_from_a_word_boundary() -> None:
    first = paragraph(1500, "a")
    second = paragraph(1500, "b")
    passages = chunk(f"{first}\n\n{second}")
    assert len(passages) == 2
    shared = shared_prefix_overlap(passages[0], passages[1])
    assert 100 <= shared <= OVERLAP
    carried = passages[1][:shared]
    assert first.endswith(carried)
    assert first[-shared - 1] == " "  # starts at a word, not inside one


def test_a_heading_stays_with_the_paragraph_after_it() -> None:
    filler = paragraph(1900, "f")
    body = paragraph(500, "body")
    passages = chunk(f"{filler}\n\n# Setup\n\n{body}")
    assert not any(p.rstrip().endswith("# Setup") for p in passages)
    holder = [p for p in passages if "# Setup" in p]
    assert holder
    assert all(f"# Setup\n\n{body}" in p for p in holder)


def test_consecutive_headings_stay_with_the_first_paragraph_after_them() -> None:
    filler = paragraph(1980, "f")  # "# Guide" alone would still fit after it
    passages = chunk(f"{filler}\n\n# Guide\n\n## Install\n\nRun the installer.")
    assert passages[-1].endswith("# Guide\n\n## Install\n\nRun the installer.")
    assert "# Guide" not in passages[0]


def test_a_heading_before_a_long_paragraph_opens_its_first_piece() -> None:
    body = " ".join(words(40, start=n * 40) for n in range(30))  # ~7 000 characters of sentences
    passages = chunk(f"## Limits\n\n{body}")
    assert passages[0].startswith("## Limits\n\nw0 w1")


def test_a_long_paragraph_is_split_at_sentence_boundaries_with_overlap() -> None:
    sentences = [words(30, start=n * 30) for n in range(40)]
    body = " ".join(sentences)
    assert len(body) > 3 * MAX_CHARS
    passages = chunk(body)
    assert len(passages) >= 3
    for passage in passages:
        assert len(passage) <= MAX_CHARS
        assert passage.endswith(".")  # cut after a sentence, never inside one
    for previous, following in itertools.pairwise(passages):
        assert shared_prefix_overlap(previous, following) >= 50
    seen = set(" ".join(passages).replace(".", "").split())
    assert seen == set(body.replace(".", "").split())


def test_a_sentence_longer_than_a_passage_is_split_between_words() -> None:
    body = " ".join(f"word{i}" for i in range(2000))  # one sentence, ~19 000 characters
    passages = chunk(body)
    for passage in passages:
        assert len(passage) <= MAX_CHARS
        assert re.fullmatch(r"word\d+( word\d+)*", passage), "cut inside a word"
    seen = set(" ".join(passages).split())
    assert seen == set(body.split())


def test_a_word_longer_than_a_passage_is_cut_hard() -> None:
    word = "".join(chr(ord("a") + i % 26) for i in range(5000))
    passages = chunk(f"Before.\n\n{word}\n\nAfter.")
    for passage in passages:
        assert 0 < len(passage) <= MAX_CHARS
    joined = "".join(passages)
    for start in range(0, len(word), 500):
        assert word[start : start + 100] in joined


def test_a_fenced_code_block_with_blank_lines_stays_whole() -> None:
    code = "```python\ndef f():\n    return 1\n\n\n# not a heading\nprint(f())\n```"
    text = f"Intro paragraph.\n\n{code}\n\nOutro."
    passages = chunk(text)
    assert passages == [text]


def test_a_long_code_block_is_split_between_lines() -> None:
    lines = [f"    value_{i} = compute({i})  # step {i}" for i in range(200)]
    code = "```python\n" + "\n".join(lines) + "\n```"
    passages = chunk(code)
    assert len(passages) > 1
    fences = {"```python", "```"}
    for passage in passages:
        assert len(passage) <= MAX_CHARS
        # the first line may be the carried end of a line; every other line is whole
        for line in passage.split("\n")[1:]:
            assert line in lines or line in fences
    assert set(lines) <= {line for p in passages for line in p.split("\n")}


def test_the_same_text_always_gives_the_same_passages() -> None:
    text = "\n\n".join(paragraph(300 + 37 * n, f"d{n}x") for n in range(30))
    assert chunk(text) == chunk(text)


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        chunk("text", max_chars=0)
    with pytest.raises(ValueError, match="overlap"):
        chunk("text", overlap=-1)


def texts(tokens: list[str], max_tokens: int) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(tokens), max_size=max_tokens).map("".join)


MARKDOWNISH = [*"ab cd.\n\n#`~!?\t", "```", "~~~", "# ", "\r\n", "xyzw" * 20]


@settings(max_examples=300, deadline=None)
@given(text=texts(MARKDOWNISH, 1500), max_chars=st.integers(1, 400), overlap=st.integers(0, 300))
def test_every_passage_fits_and_none_is_empty(text: str, max_chars: int, overlap: int) -> None:
    passages = chunk(text, max_chars=max_chars, overlap=overlap)
    assert all(0 < len(p) <= max_chars and p.strip() for p in passages)
    assert bool(passages) == bool(text.strip())
    assert passages == chunk(text, max_chars=max_chars, overlap=overlap)


@settings(max_examples=200, deadline=None)
@given(
    text=texts([*"abc .\n#", "longword" * 3], 1000),
    max_chars=st.integers(30, 300),
)
def test_no_word_is_lost(text: str, max_chars: int) -> None:
    passages = chunk(text, max_chars=max_chars, overlap=max_chars // 5)
    source_words = set(text.split())
    assume(all(len(w) <= max_chars for w in source_words))  # no hard cut in this test
    assert set(" ".join(passages).split()) == source_words
