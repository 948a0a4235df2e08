r"""Whether an extraction's output schema is constrained enough that its result cannot carry an attack.

``extract()`` reads untrusted content through a model and returns structured data. An instruction to
the agent's model is written in words, and words need letters: data in which the content's author can
choose only a few letters in all cannot smuggle one. So a schema leaves the run untainted when every
value it admits is drawn from a small, fixed space and the *free letters* of the whole result stay
within :data:`MAX_FREE_LETTERS`. Anything this module cannot prove bounded (free text, references,
combinators, a keyword or a regular expression feature it does not know) taints. When in doubt, taint.

The rule, value by value (each one's free letters in brackets):

- ``boolean``, ``null``, ``integer`` and ``number`` (with bounds or not) [0]; a ``const`` [0]; an
  ``enum`` [1 when a value holds a letter: the choice of one of the developer's words].
- a ``string`` only with a ``pattern`` that provably constrains the whole text: anchored at both ends
  (``^...$``: JSON Schema's ``pattern`` is a search, so ``[0-9]`` admits any text holding a digit) and
  written in this subset only: literal characters, escaped punctuation (``\.``), ``\d``, classes of
  listed characters and ranges (``[A-Z0-9_-]``, never negated), groups (``(...)``, ``(?:...)``) with
  ``|`` inside them, and the quantifiers ``?``, ``*``, ``+``, ``{n}``, ``{n,}``, ``{n,m}``. Wildcards
  (``.``, ``\w``, ``\s``, ``\S``, ``\W``, ``\D``, ``\p{..}``), negated or nested classes, flags,
  lookarounds, backreferences and every other escape are not in it. Its text is at most
  :data:`MAX_STRING_LENGTH` characters (``maxLength``, or the pattern's own bound). Its free letters
  are all the letters of its text but the literal ones the pattern fixes (outside any group, class or
  quantifier: the ``ORD`` of ``^ORD-\d{6}$``), never more than the text's length.
- an ``array`` with ``items`` and ``maxItems`` of at most :data:`MAX_ITEMS` [``maxItems`` times its
  item's]; a closed ``object`` (``additionalProperties: false``) [the sum of its properties'].
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MAX_ITEMS = 10
"""The longest array a conservative schema allows."""
MAX_STRING_LENGTH = 200
"""The longest patterned string a conservative schema allows."""
MAX_FREE_LETTERS = 32
"""The most letters the content's author can choose across a whole conservative result: short codes
(``^[A-Z]{3}$``), a few choices from enums, never a sentence."""

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
"""Keywords that describe a value without widening what it may be."""
_NUMERIC = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


def is_conservative(schema: Any) -> bool:
    """Whether every value ``schema`` admits is drawn from a small, fixed space (see the module)."""
    if not isinstance(schema, dict):
        return False
    if "$defs" in schema or "definitions" in schema:
        return False  # nested models arrive as references, which are not followed
    letters = free_letters(schema)
    return letters is not None and letters <= MAX_FREE_LETTERS


def free_letters(schema: Any) -> float | None:
    """The most letters the content's author chooses in a value of ``schema``; None: not bounded."""
    if not isinstance(schema, dict):
        return None
    keys = set(schema) - _ANNOTATIONS
    if "const" in schema:
        return 0 if keys <= {"const", "type"} and _scalar(schema["const"]) else None
    if "enum" in schema:
        values = schema["enum"]
        listed = isinstance(values, list) and bool(values) and all(map(_scalar, values))
        if not (keys <= {"enum", "type"} and listed):
            return None
        wordy = len(values) > 1 and any(isinstance(v, str) and _has_letter(v) for v in values)
        return 1 if wordy else 0
    kind = schema.get("type")
    if kind in ("boolean", "null"):
        return 0 if keys == {"type"} else None
    if kind in ("integer", "number"):
        return 0 if keys <= {"type", *_NUMERIC} else None
    if kind == "string":
        return _patterned_string(schema, keys)
    if kind == "array":
        return _short_array(schema, keys)
    if kind == "object":
        return _closed_object(schema, keys)
    return None  # no type, a list of types, references, combinators: any of these may widen it


def _scalar(value: Any) -> bool:
    return (
        value is None
        or isinstance(value, bool | int | float)
        or (isinstance(value, str) and len(value) <= MAX_STRING_LENGTH)
    )


def _has_letter(text: str) -> bool:
    return any(char.isalpha() for char in text)


def _bound(schema: dict[str, Any], key: str, most: int) -> int | None:
    value = schema.get(key)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= most:
        return value
    return None


def _patterned_string(schema: dict[str, Any], keys: set[str]) -> float | None:
    if not keys <= {"type", "pattern", "maxLength", "minLength"}:
        return None
    if not isinstance(schema.get("pattern"), str):
        return None
    span = pattern_span(schema["pattern"])
    if span is None:
        return None
    longest = span.longest
    if "maxLength" in schema:
        bound = _bound(schema, "maxLength", MAX_STRING_LENGTH)
        if bound is None:
            return None
        longest = min(longest, bound)
    if longest > MAX_STRING_LENGTH:
        return None
    return min(span.free, longest)  # a free letter takes a character


def _short_array(schema: dict[str, Any], keys: set[str]) -> float | None:
    if not keys <= {"type", "items", "maxItems", "minItems", "uniqueItems"} or "items" not in keys:
        return None
    longest = _bound(schema, "maxItems", MAX_ITEMS)
    item = free_letters(schema["items"])
    if longest is None or item is None:
        return None
    return longest * item


def _closed_object(schema: dict[str, Any], keys: set[str]) -> float | None:
    if not keys <= {"type", "properties", "required", "additionalProperties"}:
        return None
    if schema.get("additionalProperties") is not False:
        return None
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return None
    total = 0.0
    for child in properties.values():
        letters = free_letters(child)
        if letters is None:
            return None
        total += letters
    return total


# ---- patterns -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """What a pattern admits, at most (``math.inf``: unbounded)."""

    longest: float
    """Characters."""
    letters: float
    """Letters, the literal ones included."""
    free: float
    """Letters but the literal ones the pattern fixes."""


_EMPTY = Span(0, 0, 0)
_SPECIAL = frozenset("^$.|?*+()[]{}\\")
_ESCAPABLE = frozenset("^$.|?*+()[]{}\\/-")


class _Refused(Exception):
    """The pattern is outside the subset (or not anchored): it proves nothing."""


def pattern_span(pattern: str) -> Span | None:
    """The span of an anchored pattern of the module's subset; None for any other pattern."""
    if len(pattern) < 2 or pattern[0] != "^" or pattern[-1] != "$":
        return None
    body = pattern[1:-1]
    if (len(body) - len(body.rstrip("\\"))) % 2:
        return None  # the final ``$`` is escaped: a literal, not an anchor
    parser = _Parser(body)
    try:
        # a sequence, not an alternation: ``^a|b$`` is ``(^a)|(b$)``, anchored on one side each
        span = parser.sequence()
        if parser.at < len(body):
            raise _Refused
    except _Refused:
        return None
    return span


class _Parser:
    """Recursive descent over the subset; anything else raises ``_Refused``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.at = 0

    def _peek(self) -> str | None:
        return self.text[self.at] if self.at < len(self.text) else None

    def _take(self) -> str:
        if self.at >= len(self.text):
            raise _Refused
        char = self.text[self.at]
        self.at += 1
        return char

    def alternation(self) -> Span:
        branches = [self.sequence()]
        while self._peek() == "|":
            self.at += 1
            branches.append(self.sequence())
        if len(branches) == 1:
            return branches[0]
        letters = max(branch.letters for branch in branches)  # a choice: no letter of it is fixed
        return Span(max(branch.longest for branch in branches), letters, letters)

    def sequence(self) -> Span:
        total = _EMPTY
        while self._peek() not in (None, "|", ")"):
            span = self._quantified(self._atom())
            total = Span(total.longest + span.longest, total.letters + span.letters, total.free + span.free)
        return total

    def _atom(self) -> Span:
        char = self._take()
        if char == "(":
            if self._peek() == "?":
                self.at += 1
                if self._take() != ":":
                    raise _Refused  # flags, lookarounds, named groups
            inner = self.alternation()
            if self._take() != ")":
                raise _Refused
            return Span(inner.longest, inner.letters, inner.letters)  # a group fixes nothing
        if char == "[":
            return self._class()
        if char == "\\":
            escaped = self._take()
            if escaped == "d" or escaped in _ESCAPABLE:
                return Span(1, 0, 0)
            raise _Refused  # \w, \s, \S, \p{..}, \b, \n, backreferences, ...
        if char in _SPECIAL:
            raise _Refused  # ``.``, a stray anchor, quantifier or bracket
        return Span(1, 1 if char.isalpha() else 0, 0)

    def _class(self) -> Span:
        if self._peek() == "^":
            raise _Refused  # a negated class admits nearly everything
        members: list[tuple[str, str]] = []
        while True:
            if self.text.startswith(("&&", "--", "~~"), self.at):
                raise _Refused  # set operations (Rust's regex)
            char = self._take()
            if char == "]" and members:
                break
            if char == "[":
                raise _Refused  # nested classes, POSIX classes (``[[:alpha:]]``)
            low = self._class_char(char)
            if self.text.startswith("--", self.at):
                raise _Refused
            if self._peek() == "-" and self.text[self.at + 1 : self.at + 2] not in ("]", ""):
                self.at += 1
                high = self._class_char(self._take())
                if high < low:
                    raise _Refused
                members.append((low, high))
            else:
                members.append((low, low))
        letters = 1 if any(_range_has_letter(low, high) for low, high in members) else 0
        return Span(1, letters, letters)

    def _class_char(self, char: str) -> str:
        if char == "\\":
            escaped = self._take()
            if escaped == "d":
                raise _Refused  # ``[\d]``: write ``[0-9]``, a range every engine reads alike
            if escaped not in _ESCAPABLE:
                raise _Refused
            return escaped
        if char in "[]":
            raise _Refused
        return char

    def _quantified(self, span: Span) -> Span:
        char = self._peek()
        if char == "{":
            return self._counted(span)
        if char not in ("?", "*", "+"):
            return span
        self.at += 1
        return self._repeat(span, 1 if char == "?" else math.inf)

    def _counted(self, span: Span) -> Span:
        close = self.text.find("}", self.at)
        if close < 0:
            raise _Refused
        low, comma, high = self.text[self.at + 1 : close].partition(",")
        if not low.isdigit() or not (high.isdigit() or not high):
            raise _Refused
        most = math.inf if comma and not high else int(high or low)
        if most < int(low):
            raise _Refused
        self.at = close + 1
        return self._repeat(span, most)

    def _repeat(self, span: Span, most: float) -> Span:
        if self._peek() == "?":
            self.at += 1  # lazy: the same texts
        if self._peek() in ("?", "*", "+", "{"):
            raise _Refused  # a quantified quantifier
        letters = _times(most, span.letters)  # a quantifier fixes nothing: ``(ab)*`` is the author's count
        return Span(_times(most, span.longest), letters, letters)


def _times(count: float, each: float) -> float:
    return 0 if each == 0 else count * each


def _range_has_letter(low: str, high: str) -> bool:
    if ord(high) > 0x7F:
        return True  # beyond ASCII, scripts with letters everywhere: assume one
    return any(chr(code).isalpha() for code in range(ord(low), ord(high) + 1))
