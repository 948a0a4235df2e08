"""Splits a document into passages for embedding.

Paragraphs (separated by blank lines; a fenced code block counts as one) are packed whole into
passages of at most ``max_chars``; a Markdown heading stays with the paragraph after it, and each
passage starts with about ``overlap`` characters from the end of the one before, so a sentence cut
by a passage boundary is still found whole in one of them. A paragraph longer than a passage is
split at line, then sentence, then word boundaries (a single word longer than a passage is cut).

Bump :data:`CHUNKER_VERSION` whenever the output for some text changes: collections embedded by an
older version are re-embedded into a new generation.
"""

from __future__ import annotations

import re

CHUNKER_VERSION = 1
MAX_CHARS = 2000
OVERLAP = 200

_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t]*\n)+")
_LEADING_BLANK_LINES = re.compile(r"(?:[ \t]*\n)+")
_HEADING = re.compile(r" {0,3}#+(?:[ \t\n]|$)")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")
# sentence ends, including the ideographic full stop and full-width marks
_SENTENCE_END = re.compile("[.!?;:\u3002\uff01\uff1f][ \t]+")
_WHITESPACE = re.compile(r"\s+")
_SPACE = re.compile(r"\s")
_NON_SPACE = re.compile(r"\S")

_PARAGRAPH_SEP = "\n\n"

Atom = tuple[str, str]
"""A piece of text that is never split further, with the separator that goes before it."""


def chunk(text: str, *, max_chars: int = MAX_CHARS, overlap: int = OVERLAP) -> list[str]:
    """The passages of ``text``: each at most ``max_chars`` long, none empty, in order.

    Deterministic and linear in the length of ``text``.

    Raises:
        ValueError: ``max_chars`` is below 1 or ``overlap`` below 0.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    if overlap < 0:
        raise ValueError(f"overlap must be at least 0, got {overlap}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.strip():
        return []
    # half of every passage at least is new text
    overlap = min(overlap, max_chars // 2)
    # pieces of a long paragraph leave room for the overlap carried in front of them
    piece_chars = max(1, max_chars - overlap - len(_PARAGRAPH_SEP))
    atoms: list[Atom] = []
    for unit in _units(_paragraphs(text)):
        if len(unit) <= max_chars:
            atoms.append((_PARAGRAPH_SEP, unit))
        else:
            pieces = _split_long(unit, piece_chars, max_chars)
            if pieces:
                atoms.append((_PARAGRAPH_SEP, pieces[0][1]))
                atoms.extend(pieces[1:])
    return _pack(atoms, max_chars, overlap)


def _paragraphs(text: str) -> list[str]:
    parts = _fenced_paragraphs(text) if "```" in text or "~~~" in text else _PARAGRAPH_BREAK.split(text)
    paragraphs = []
    for part in parts:
        blank = _LEADING_BLANK_LINES.match(part)
        paragraph = (part[blank.end() :] if blank else part).rstrip()
        if paragraph.strip():
            paragraphs.append(paragraph)
    return paragraphs


def _fenced_paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs, a fenced code block (blank lines and all) kept in one."""
    paragraphs: list[str] = []
    current: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        marker = _FENCE.match(line)
        if fence is not None:
            current.append(line)
            if marker and marker[1][0] == fence[0] and len(marker[1]) >= len(fence) and not marker[2].strip():
                fence = None
        elif marker and not (marker[1][0] == "`" and "`" in marker[2]):
            fence = marker[1]
            current.append(line)
        elif not line.strip():
            if current:
                paragraphs.append("\n".join(current))
                current = []
        else:
            current.append(line)
    if current:
        paragraphs.append("\n".join(current))
    return paragraphs


def _units(paragraphs: list[str]) -> list[str]:
    """Paragraphs with each heading joined to the paragraph after it."""
    units: list[str] = []
    headings: list[str] = []
    for paragraph in paragraphs:
        if _HEADING.match(paragraph):
            headings.append(paragraph)
            continue
        if headings:
            headings.append(paragraph)
            units.append(_PARAGRAPH_SEP.join(headings))
            headings = []
        else:
            units.append(paragraph)
    if headings:
        units.append(_PARAGRAPH_SEP.join(headings))
    return units


def _split_long(unit: str, limit: int, word_limit: int) -> list[Atom]:
    """Pieces of about ``limit`` characters, packed greedily; a word alone may reach ``word_limit``."""
    pieces: list[Atom] = []
    parts: list[str] = []
    length = 0
    first_sep = ""

    def flush() -> None:
        piece = "".join(parts).lstrip("\n").rstrip()
        if piece.strip():
            pieces.append((first_sep, piece))

    for sep, segment in _segments(unit, limit, word_limit):
        if parts and length + len(sep) + len(segment) <= limit:
            parts.append(sep)
            parts.append(segment)
            length += len(sep) + len(segment)
        else:
            if parts:
                flush()
            parts = [segment]
            length = len(segment)
            first_sep = sep
    if parts:
        flush()
    return pieces


def _segments(unit: str, limit: int, word_limit: int) -> list[Atom]:
    """Lines, or the sentences of a long line, or the words of a long sentence, or cuts of a long word."""
    segments: list[Atom] = []
    for i, line in enumerate(unit.split("\n")):
        line_sep = "\n" if i else ""
        if len(line) <= limit:
            segments.append((line_sep, line))
            continue
        for j, sentence in enumerate(_sentences(line)):
            sentence_sep = line_sep if j == 0 else " "
            if len(sentence) <= limit:
                segments.append((sentence_sep, sentence))
                continue
            _word_runs(sentence, sentence_sep, limit, word_limit, segments)
    return segments


def _sentences(line: str) -> list[str]:
    """The line cut after each sentence end (the punctuation stays, the spaces after it go)."""
    sentences = []
    start = 0
    for end in _SENTENCE_END.finditer(line):
        sentences.append(line[start : end.start() + 1])
        start = end.end()
    sentences.append(line[start:])
    return sentences


def _word_runs(sentence: str, sep: str, limit: int, word_limit: int, out: list[Atom]) -> None:
    """Runs of whole words of at most ``limit`` characters, appended to ``out``.

    A word longer than ``limit`` is a run of its own, up to ``word_limit``; a longer one is cut.
    Runs rather than single words keep a long text to a few segments per passage.
    """
    end = len(sentence)
    found = _NON_SPACE.search(sentence)
    pos = found.start() if found else end
    while pos < end:
        if pos + limit >= end:
            out.append((sep, sentence[pos:].rstrip()))
            return
        cut = max(sentence.rfind(" ", pos, pos + limit + 1), sentence.rfind("\t", pos, pos + limit + 1))
        if cut <= pos:
            space = _SPACE.search(sentence, pos)
            cut = space.start() if space else end
            if cut - pos > word_limit:
                out.append((sep, sentence[pos : pos + word_limit]))
                sep = ""  # the rest of the word follows without a space
                pos += word_limit
                continue
        out.append((sep, sentence[pos:cut].rstrip()))
        sep = " "
        found = _NON_SPACE.search(sentence, cut)
        pos = found.start() if found else end


def _pack(atoms: list[Atom], max_chars: int, overlap: int) -> list[str]:
    passages: list[str] = []
    parts: list[str] = []
    current: list[Atom] = []
    length = 0
    for sep, atom in atoms:
        if parts and length + len(sep) + len(atom) <= max_chars:
            parts.append(sep)
            parts.append(atom)
            length += len(sep) + len(atom)
            current.append((sep, atom))
            continue
        if parts:
            passages.append("".join(parts))
            carry = _carry(current, min(overlap, max_chars - len(sep) - len(atom)))
            parts = [carry, sep, atom] if carry else [atom]
        else:
            parts = [atom]
        length = sum(len(part) for part in parts)
        current = [(sep, atom)]
    if parts:
        passages.append("".join(parts))
    return passages


def _carry(atoms: list[Atom], limit: int) -> str:
    """The end of a passage to repeat at the start of the next: whole atoms if they fit in ``limit``."""
    if limit <= 0:
        return ""
    total = 0
    start = len(atoms)
    for i in range(len(atoms) - 1, -1, -1):
        extra = len(atoms[i][1]) + (len(atoms[i + 1][0]) if i + 1 < len(atoms) else 0)
        if total + extra > limit:
            break
        total += extra
        start = i
    if start == len(atoms):
        return _tail(atoms[-1][1], limit)
    parts = [atoms[start][1]]
    for sep, atom in atoms[start + 1 :]:
        parts.append(sep)
        parts.append(atom)
    return "".join(parts)


def _tail(text: str, limit: int) -> str:
    """At most ``limit`` characters from the end of ``text``, starting at a word (or nothing)."""
    start = max(0, len(text) - limit)
    if start > 0 and not text[start - 1].isspace():
        boundary = _WHITESPACE.search(text, start)
        if boundary is None:
            return ""  # the end is one word longer than the limit: better no overlap than half a word
        start = boundary.end()
    return text[start:].strip()
