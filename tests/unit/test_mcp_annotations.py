"""MCP tool annotations set the defaults of each tool's trust and effect handling (chamvi.mcp.classify)."""

from __future__ import annotations

import pytest

from chamvi import EffectSpec, Trust, mcp_server
from chamvi.errors import InvalidAgentDefinitionError
from chamvi.mcp import classify
from chamvi.models import McpToolHints

SERVER = mcp_server("fs", command=["mcp-server-filesystem", "/tmp"])


def hints(**given: bool) -> McpToolHints:
    return McpToolHints(**given)


@pytest.mark.parametrize(
    ("given", "taint", "guard", "effect"),
    [
        (None, False, False, False),  # the seed's rule: an unclassified third-party tool is trusted
        (hints(read_only=True, open_world=False), False, False, False),  # read_file
        (hints(read_only=False, destructive=True, idempotent=True, open_world=False), False, True, False),
        (hints(read_only=False, destructive=True, idempotent=False, open_world=False), False, True, True),
        (hints(read_only=False, destructive=False, idempotent=True, open_world=False), False, False, False),
        (hints(read_only=False, destructive=False, open_world=False), False, False, True),  # additive
        (hints(read_only=False), False, True, True),  # the protocol's default: destructive
        (hints(destructive=True), False, True, True),  # destructive without readOnlyHint: a writer
        (hints(read_only=True, open_world=True), True, False, False),  # a web search
        (hints(read_only=False, destructive=False, open_world=True), True, True, True),  # a post
        (hints(read_only=True, destructive=True), False, False, False),  # meaningless for readers
    ],
)
def test_annotations_set_taint_guard_and_effect_defaults(
    given: McpToolHints | None, taint: bool, guard: bool, effect: bool
) -> None:
    trust, spec = classify(SERVER, "tool", given)
    assert (trust.taint, trust.guard_when_tainted, spec is not None) == (taint, guard, effect)


def test_an_untrusted_server_taints_and_guards_every_tool_whatever_it_claims() -> None:
    server = mcp_server("web", url="https://example.com/mcp", untrusted=True)
    trust, effect = classify(server, "search", hints(read_only=True, open_world=False))
    assert (trust.taint, trust.guard_when_tainted, effect) == (True, True, None)


def test_a_servers_trust_adds_to_what_the_annotations_say() -> None:
    server = mcp_server("fs", command=["x"], trust=Trust(taint=True))
    trust, _ = classify(server, "write_file", hints(read_only=False, destructive=True))
    assert (trust.taint, trust.guard_when_tainted) == (True, True)
    reader, _ = classify(server, "read_file", hints(read_only=True))
    assert (reader.taint, reader.guard_when_tainted) == (True, False)


async def test_a_predicate_in_the_servers_trust_is_asked_when_the_annotations_do_not_decide() -> None:
    server = mcp_server("fs", command=["x"], trust=Trust(guard_when_tainted=lambda args, ctx: args == "rm"))
    trust, _ = classify(server, "read_file", hints(read_only=True))
    assert callable(trust.guard_when_tainted)
    assert trust.guard_when_tainted("rm", None) is True  # type: ignore[arg-type]
    writer, _ = classify(server, "write_file", hints(read_only=False))
    assert writer.guard_when_tainted is True


def test_declared_effects_replace_the_effect_the_annotations_imply() -> None:
    spec = EffectSpec(effect_key=lambda args, ctx: "one")
    server = mcp_server("fs", command=["x"], effects={"write_file": spec})
    _, effect = classify(server, "write_file", hints(read_only=False, idempotent=True))
    assert effect is spec


def test_untrusted_must_be_a_boolean() -> None:
    with pytest.raises(InvalidAgentDefinitionError, match="untrusted must be True or False"):
        mcp_server("fs", command=["x"], untrusted="yes")  # type: ignore[arg-type]


def test_a_listing_recorded_before_hints_reads_back_without_them() -> None:
    from chamvi.models import McpToolInfo

    old = McpToolInfo.model_validate({"server": "fs", "name": "read_file"})
    assert old.hints is None
    assert "hints" not in old.model_dump(mode="json")  # new listings without hints stay as small
