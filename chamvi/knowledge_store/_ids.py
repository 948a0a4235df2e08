"""Page ids (``type/slug``) and the links between pages (``[text](type/slug)``)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from chamvi.errors import InvalidPageError

SLUG_PATTERN = r"[a-z0-9]+(?:-[a-z0-9]+)*"
"""Lowercase letters and digits in runs joined by single hyphens: ``refund-policy``, ``q3-2024``."""

_SLUG = re.compile(SLUG_PATTERN)
_ID = re.compile(rf"({SLUG_PATTERN})/({SLUG_PATTERN})")

# A code span is matched first so that a link inside backticks is left alone; images (``![..](..)``)
# are no links between pages.
_LINK = re.compile(
    r"(?P<code>`+)(?:.*?)(?P=code)"
    r"|(?<!!)\[(?P<text>(?:[^\[\]\n]|\[[^\[\]\n]*\])*)\]"
    r"\((?P<target><[^<>\n]*>|[^()\s]+)(?P<title>[ \t]+\"[^\"\n]*\")?\)"
)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


def is_slug(value: object) -> bool:
    """Whether ``value`` is a valid slug (also the rule for type names)."""
    return isinstance(value, str) and _SLUG.fullmatch(value) is not None


def is_id(value: object) -> bool:
    return isinstance(value, str) and _ID.fullmatch(value) is not None


def slugify(text: str) -> str:
    """The slug a title or a file name suggests: ``"Refund Policy (EU)"`` -> ``refund-policy-eu``."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return "-".join(re.findall(r"[a-z0-9]+", ascii_text.lower()))


def parse_id(page_id: str) -> tuple[str, str]:
    """Splits ``type/slug`` into its type and slug.

    Raises:
        InvalidPageError: ``page_id`` is not ``type/slug``.
    """
    match = _ID.fullmatch(page_id) if isinstance(page_id, str) else None
    if match is None:
        hint = ""
        if isinstance(page_id, str) and "/" in page_id:
            kind, _, slug = page_id.partition("/")
            hint = f", e.g. {slugify(kind) or 'concept'}/{slugify(slug) or 'name'}"
        raise InvalidPageError(
            f"{page_id!r} is not a page id: ids are 'type/slug' in lowercase letters and digits "
            f"joined by single hyphens{hint}"
        )
    return match.group(1), match.group(2)


def make_id(page_type: str, slug: str) -> str:
    return f"{page_type}/{slug}"


def split_anchor(target: str) -> tuple[str, str]:
    """``concept/refunds#window`` -> (``concept/refunds``, ``#window``)."""
    base, sep, anchor = target.partition("#")
    return base, sep + anchor


def target_id(target: str) -> str | None:
    """The page id a link target names, anchor dropped, or None for any other target."""
    base, _ = split_anchor(target)
    return base if _ID.fullmatch(base) else None


def map_links(content: str, change: Callable[[str], str | None]) -> str:
    """Rewrites link targets outside code: ``change(target)`` answers a new target or None to keep it."""
    out: list[str] = []
    fence: str | None = None
    for line in content.splitlines(keepends=True):
        marker = _FENCE.match(line)
        if fence is not None:
            if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence):
                fence = None
            out.append(line)
            continue
        if marker:
            fence = marker.group(1)
            out.append(line)
            continue
        out.append(_LINK.sub(lambda m: _replace(m, change), line))
    return "".join(out)


def _replace(match: re.Match[str], change: Callable[[str], str | None]) -> str:
    if match.group("code") is not None:
        return match.group(0)
    raw = match.group("target")
    target = raw[1:-1] if raw.startswith("<") else raw
    new = change(target)
    if new is None:
        return match.group(0)
    if any(c in new for c in " ()<>"):
        new = f"<{new}>"
    return f"[{match.group('text')}]({new}{match.group('title') or ''})"


def link_targets(content: str) -> list[str]:
    """Every link target outside code, in order, as written."""
    targets: list[str] = []

    def collect(target: str) -> None:
        targets.append(target)

    map_links(content, collect)
    return targets


def linked_ids(content: str) -> list[str]:
    """The page ids ``content`` links to, once each, in order of first appearance."""
    found: dict[str, None] = {}
    for target in link_targets(content):
        page_id = target_id(target)
        if page_id is not None:
            found.setdefault(page_id)
    return list(found)


def malformed_links(content: str) -> list[str]:
    """Link targets meant as page ids that are not valid ones (``Concept/Refunds``, ``a/b/c``).

    A target with a scheme, a leading ``/``, ``.`` or ``#``, or a file extension is a link to
    something else and is left alone.
    """
    bad: dict[str, None] = {}
    for target in link_targets(content):
        base, _ = split_anchor(target)
        if not base or "/" not in base or _SCHEME.match(base) or base[0] in "/.#":
            continue
        if "." in base.rsplit("/", 1)[-1] or _ID.fullmatch(base):
            continue
        bad.setdefault(target)
    return list(bad)
