"""The extraction schema classifier: conservative schemas pass, any widening feature taints."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from chamvi.schema_trust import MAX_ITEMS, MAX_STRING_LENGTH, is_conservative

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=MAX_STRING_LENGTH)
)
leaves = st.one_of(
    st.just({"type": "boolean"}),
    st.just({"type": "null"}),
    st.sampled_from(["integer", "number"]).map(lambda kind: {"type": kind, "minimum": 0}),
    st.lists(scalars, min_size=1, max_size=5).map(lambda values: {"enum": values}),
    scalars.map(lambda value: {"const": value}),
    st.integers(0, MAX_STRING_LENGTH).map(
        lambda n: {"type": "string", "pattern": "^[A-Z]+$", "maxLength": n}
    ),
)


def _extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    arrays = st.tuples(children, st.integers(0, MAX_ITEMS)).map(
        lambda pair: {"type": "array", "items": pair[0], "maxItems": pair[1]}
    )
    objects = st.dictionaries(st.text(min_size=1, max_size=8), children, max_size=4).map(
        lambda props: {"type": "object", "properties": props, "additionalProperties": False, "title": "T"}
    )
    return st.one_of(arrays, objects)


conservative = st.recursive(leaves, _extend, max_leaves=12)

WIDENINGS: list[dict[str, Any]] = [
    {"type": "string"},  # free text
    {"type": "string", "maxLength": 50},  # free text, if short
    {"type": "string", "pattern": "^.*$"},  # unbounded length
    {"type": "string", "pattern": "x", "maxLength": MAX_STRING_LENGTH + 1},
    {"$ref": "#/$defs/Other"},
    {"anyOf": [{"type": "boolean"}, {"type": "null"}]},
    {"type": "array", "items": {"type": "boolean"}},  # no maxItems
    {"type": "array", "items": {"type": "boolean"}, "maxItems": MAX_ITEMS + 1},
    {"type": "object", "properties": {}},  # open object
    {"type": "object", "properties": {}, "additionalProperties": {"type": "boolean"}},
    {"type": "integer", "format": "anything"},  # a keyword the classifier does not know
    {"type": ["boolean", "string"]},
    {},
]


def _plant(schema: dict[str, Any], widening: dict[str, Any], draw: Callable[[Any], Any]) -> dict[str, Any]:
    """``schema`` with one of its subschemas (or itself) replaced by ``widening``."""
    if schema.get("type") == "array" and draw(st.booleans()):
        return {**schema, "items": _plant(schema["items"], widening, draw)}
    if schema.get("type") == "object" and schema["properties"] and draw(st.booleans()):
        properties = schema["properties"]
        name = draw(st.sampled_from(sorted(properties)))
        return {**schema, "properties": {**properties, name: _plant(properties[name], widening, draw)}}
    return widening


@given(conservative)
def test_a_schema_built_only_from_constrained_parts_is_conservative(schema: dict[str, Any]) -> None:
    assert is_conservative(schema)


@given(conservative, st.sampled_from(WIDENINGS), st.data())
def test_one_widening_feature_anywhere_makes_a_schema_taint(
    schema: dict[str, Any], widening: dict[str, Any], data: st.DataObject
) -> None:
    assert not is_conservative(_plant(schema, widening, data.draw))


def test_pydantic_models_classify_as_their_fields_allow() -> None:
    class Verdict(BaseModel):
        model_config = ConfigDict(extra="forbid")
        spam: bool
        score: int = Field(ge=0, le=10)
        label: Literal["invoice", "receipt", "other"]
        order_id: str = Field(pattern=r"^ORD-\d{6}$", max_length=10)

    class Summary(BaseModel):
        model_config = ConfigDict(extra="forbid")
        summary: str

    class Open(BaseModel):
        spam: bool

    assert is_conservative(Verdict.model_json_schema())
    assert not is_conservative(Summary.model_json_schema())  # free text
    assert not is_conservative(Open.model_json_schema())  # extra fields allowed
