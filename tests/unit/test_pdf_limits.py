"""A PDF's page limit and time budget: counted and enforced before the pages are read, never by expanding.

A 1.6 KB PDF whose page tree references one node again and again expands to 97 336 pages, and
reading it ran past 300 s. Counting each shared node once refuses it at the cost of its size in the
file; a tree that loops or expands to countless empty nodes is refused as well.
"""

from __future__ import annotations

import itertools

import pytest

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.knowledge import folder
from chamvi.knowledge._pdf import PdfLimitReached, PdfLimits, PdfProblem, read_pdf
from tests.support.pdfs import empty_node_bomb, looping_page_tree, page_tree_bomb, text_pdf


def test_a_page_tree_bomb_is_refused_by_its_page_count_before_any_page_is_read() -> None:
    bomb = page_tree_bomb()
    assert len(bomb) < 2_000
    with pytest.raises(PdfLimitReached) as refused:
        read_pdf(bomb)
    assert str(refused.value) == "document too large: 97 336 pages, limit 2 000"


def test_a_bomb_of_nine_billion_pages_is_counted_as_cheaply() -> None:
    with pytest.raises(PdfLimitReached, match="document too large: 9 474 296 896 pages"):
        read_pdf(page_tree_bomb(levels=6))


def test_a_page_tree_that_contains_itself_is_refused() -> None:
    with pytest.raises(PdfProblem, match="its page tree contains itself"):
        read_pdf(looping_page_tree())


def test_a_tree_of_countless_empty_nodes_is_refused_by_its_node_count() -> None:
    with pytest.raises(
        PdfLimitReached, match="its page tree has 2 305 843 009 213 693 951 nodes, limit 2 000"
    ):
        read_pdf(empty_node_bomb())


def test_the_page_limit_is_the_caller_s_and_a_pdf_within_it_is_read_whole() -> None:
    three = text_pdf(["First page", "Second page", "Third page"])
    assert read_pdf(three, PdfLimits(max_pages=3)).pages == ["First page", "Second page", "Third page"]
    with pytest.raises(PdfLimitReached, match="document too large: 3 pages, limit 2"):
        read_pdf(three, PdfLimits(max_pages=2))


def test_reading_past_the_time_budget_stops_between_pages_and_within_one() -> None:
    ticks = itertools.count()
    # every look at the clock is a second later: the budget runs out while the pages are read
    clock = lambda: float(next(ticks))  # noqa: E731
    with pytest.raises(PdfLimitReached) as refused:
        read_pdf(text_pdf([f"Page {n}" for n in range(1, 6)]), PdfLimits(max_seconds=4, clock=clock))
    assert str(refused.value) == "extraction took longer than 4 s"


@pytest.mark.parametrize(
    ("limits", "problem"),
    [
        ({"max_pdf_pages": 0}, "max_pdf_pages must be a positive integer, not 0"),
        ({"max_pdf_pages": 2.5}, "max_pdf_pages must be a positive integer, not 2.5"),
        ({"max_pdf_seconds": 0}, "max_pdf_seconds must be a positive number of seconds, not 0"),
        ({"max_pdf_seconds": float("nan")}, "max_pdf_seconds must be a positive number of seconds, not nan"),
    ],
)
def test_a_folder_s_pdf_limits_must_be_positive(tmp_path, limits: dict, problem: str) -> None:
    with pytest.raises(InvalidAgentDefinitionError, match=problem):
        folder(tmp_path, **limits)
