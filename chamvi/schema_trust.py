"""Whether an extraction's output schema is constrained enough that its result cannot carry an attack.

``extract()`` reads untrusted content through a model and returns structured data. Data whose every
value is drawn from a small, fixed space (a boolean, a number, one of a few literals, a short
patterned string, a short list of those) cannot smuggle instructions to the agent's model, so it
leaves the run untainted. Anything else (free text, references, combinators, a keyword this module
does not know) could, so it taints. When in doubt, taint: the classifier is conservative.
"""

from __future__ import annotations

from typing import Any

MAX_ITEMS = 10
"""The longest array a conservative schema allows."""
MAX_STRING_LENGTH = 200
"""The longest patterned string a conservative schema allows."""

_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment"})
"""Keywords that describe a value without widening what it may be."""
_NUMERIC = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})


def is_conservative(schema: Any) -> bool:
    """Whether every value ``schema`` admits is drawn from a small, fixed space (see the module)."""
    if not isinstance(schema, dict):
        return False
    if "$defs" in schema or "definitions" in schema:
        return False  # nested models arrive as references, which are not followed
    return _value(schema)


def _value(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return False
    keys = set(schema) - _ANNOTATIONS
    if "const" in schema:
        return keys == {"const"} and _scalar(schema["const"])
    if "enum" in schema:
        allowed = {"enum", "type"}
        values = schema["enum"]
        return keys <= allowed and isinstance(values, list) and bool(values) and all(map(_scalar, values))
    kind = schema.get("type")
    if kind in ("boolean", "null"):
        return keys == {"type"}
    if kind in ("integer", "number"):
        return keys <= {"type", *_NUMERIC}
    if kind == "string":
        return _short_patterned_string(schema, keys)
    if kind == "array":
        return _short_array(schema, keys)
    if kind == "object":
        return _closed_object(schema, keys)
    return False  # no type, a list of types, references, combinators: any of these may widen it


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float) or (
        isinstance(value, str) and len(value) <= MAX_STRING_LENGTH
    )


def _short_patterned_string(schema: dict[str, Any], keys: set[str]) -> bool:
    if not keys <= {"type", "pattern", "maxLength", "minLength"} or "pattern" not in keys:
        return False
    longest = schema.get("maxLength")
    return isinstance(longest, int) and not isinstance(longest, bool) and 0 <= longest <= MAX_STRING_LENGTH


def _short_array(schema: dict[str, Any], keys: set[str]) -> bool:
    if not keys <= {"type", "items", "maxItems", "minItems", "uniqueItems"} or "items" not in keys:
        return False
    longest = schema.get("maxItems")
    if not isinstance(longest, int) or isinstance(longest, bool) or not 0 <= longest <= MAX_ITEMS:
        return False
    return _value(schema["items"])


def _closed_object(schema: dict[str, Any], keys: set[str]) -> bool:
    if not keys <= {"type", "properties", "required", "additionalProperties"}:
        return False
    if schema.get("additionalProperties") is not False:
        return False
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        return False
    return all(_value(child) for child in properties.values())
