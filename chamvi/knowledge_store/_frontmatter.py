"""A small, strict front-matter reader and writer: the YAML subset pages need, and nothing else.

Read: ``key: value`` lines whose values are plain, ``"double"`` or ``'single'`` quoted strings, or
lists of them (``[a, b]`` or ``- item`` lines below the key); comments and blank lines. Anything else
(nested maps, block scalars, anchors) is refused with the line it is on, so a person can fix it.
Every value reads as a string: ``count: 3`` is ``"3"``.
"""

from __future__ import annotations

import json
import re

from chamvi.knowledge_store._types import FieldValue

_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_-]*):(?:[ \t]+(.*?))?[ \t]*$")
_ITEM = re.compile(r"[ \t]*-(?:[ \t]+(.*?))?[ \t]*$")
_PLAIN = re.compile(r"[^\s\"'\[\]{}#&*!|>%@`,?:-][^\n]*")
_RESERVED_START = "{|>&*!%@`"
_COMMENT_START = re.compile(r"[ \t]#")


class FrontMatterError(ValueError):
    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def split(text: str) -> tuple[dict[str, FieldValue] | None, str]:
    """The front matter (None when the text has none) and the body after it.

    Raises:
        FrontMatterError: front matter this reader does not accept.
    """
    text = text.removeprefix("\ufeff")
    # split on "\n" only: str.splitlines() would also break a value at U+2028 and other separators
    lines = text.split("\n")
    lines = [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    if not lines or lines[0].rstrip("\r\n") != "---":
        return None, text
    for end in range(1, len(lines)):
        if lines[end].rstrip("\r\n") in ("---", "..."):
            fields = _parse([line.rstrip("\r\n") for line in lines[1:end]])
            return fields, "".join(lines[end + 1 :])
    raise FrontMatterError(1, "the front matter is never closed: end it with a line '---'")


def _parse(lines: list[str]) -> dict[str, FieldValue]:
    fields: dict[str, FieldValue] = {}
    index = 0
    while index < len(lines):
        number = index + 2  # 1-based, after the opening '---'
        line = lines[index]
        index += 1
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        match = _KEY.fullmatch(line)
        if match is None:
            raise FrontMatterError(number, f"expected 'key: value', found {line.strip()!r}")
        key, raw = match.group(1), match.group(2)
        if key in fields:
            raise FrontMatterError(number, f"{key!r} is given twice")
        if raw is None or raw == "" or raw.startswith("#"):
            items: list[str] = []
            while index < len(lines):
                item = _ITEM.fullmatch(lines[index])
                if item is None:
                    break
                items.append(_scalar(item.group(1) or "", index + 2))
                index += 1
            fields[key] = items if items else ""
        elif raw.startswith("["):
            fields[key] = _flow_list(raw, number)
        else:
            fields[key] = _scalar(raw, number)
    return fields


def _scalar(raw: str, number: int) -> str:
    raw = raw.strip()
    if raw.startswith('"'):
        try:
            value, end = json.JSONDecoder().raw_decode(raw)
        except json.JSONDecodeError:
            raise FrontMatterError(number, f"unreadable quoted string {raw!r}") from None
        if not isinstance(value, str) or not _only_comment(raw[end:]):
            raise FrontMatterError(number, f"unreadable quoted string {raw!r}")
        return value
    if raw.startswith("'"):
        match = re.match(r"'((?:[^']|'')*)'", raw)
        if match is None or not _only_comment(raw[match.end() :]):
            raise FrontMatterError(number, f"unreadable quoted string {raw!r}")
        return match.group(1).replace("''", "'")
    if raw and raw[0] in _RESERVED_START:
        raise FrontMatterError(
            number, f"{raw!r} uses YAML this reader does not accept: quote the value, or use a plain string"
        )
    return re.sub(r"[ \t]+#.*$", "", raw)


def _only_comment(rest: str) -> bool:
    rest = rest.strip()
    return not rest or rest.startswith("#")


def _flow_list(raw: str, number: int) -> list[str]:
    body = re.sub(r"[ \t]+#[^\]]*$", "", raw).strip()
    if not body.endswith("]"):
        raise FrontMatterError(number, f"unclosed list {raw!r}: end it with ']'")
    inner = body[1:-1].strip()
    if not inner:
        return []
    items: list[str] = []
    current = ""
    quote: str | None = None
    escaped = False
    for char in inner:
        if quote is not None:
            current += char
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote:
                quote = None
        elif char in "\"'" and not current.strip():
            quote = char
            current += char
        elif char == ",":
            items.append(current)
            current = ""
        elif char in "[]{}":
            raise FrontMatterError(number, f"nested lists and maps are not accepted: {raw!r}")
        else:
            current += char
    items.append(current)
    return [_scalar(item, number) for item in items]


def _quote(value: str, in_list: bool = False) -> str:
    plain = (
        _PLAIN.fullmatch(value) is not None
        and value == value.strip()
        and ": " not in value
        # the reader ends a plain value at a space or a tab before '#' (a comment)
        and _COMMENT_START.search(value) is None
        and not value.endswith(":")
        and not (in_list and any(c in value for c in ",[]{}"))
    )
    return value if plain else json.dumps(value, ensure_ascii=False)


def render(fields: dict[str, FieldValue]) -> str:
    """``---`` lines around one ``key: value`` line per field, values quoted when they need it."""
    lines = ["---"]
    for key, value in fields.items():
        if isinstance(value, list):
            lines.append(f"{key}: [{', '.join(_quote(v, in_list=True) for v in value)}]")
        else:
            lines.append(f"{key}: {_quote(value)}")
    lines.append("---")
    return "\n".join(lines) + "\n"
