import pytest

from chamvi.models import Invoker, TriggerEnvelope
from chamvi.permissions import (
    PolicyRun,
    has_narrowed_permission,
    has_permission,
    matches_permission,
    require_tool_permission,
)


@pytest.mark.parametrize(
    ("granted", "required", "expected"),
    [
        ("*", "tool:ops:deploy", True),
        ("tool:ops:deploy", "tool:ops:deploy", True),
        ("tool:*:deploy", "tool:ops:deploy", True),
        ("tool:ops:*", "tool:ops:deploy", True),
        ("tool:*", "tool:ops:deploy", False),
        ("tool:ops:deploy:x", "tool:ops:deploy", False),
        ("tool:ops:rollback", "tool:ops:deploy", False),
        ("knowledge:*", "knowledge:read", True),
    ],
)
def test_permission_matching_follows_the_segment_rule(granted: str, required: str, expected: bool) -> None:
    assert matches_permission(granted, required) is expected


def test_require_tool_permission_checks_the_invoker_and_refuses_runs_without_one() -> None:
    policy = require_tool_permission()
    ada = PolicyRun(
        "r", "ops", TriggerEnvelope(invoker=Invoker(id="u", kind="user", permissions=["tool:ops:deploy"]))
    )
    nobody = PolicyRun("r", "ops", TriggerEnvelope())
    assert policy("deploy", ada) and not policy("rollback", ada)
    assert not policy("deploy", nobody)
    assert require_tool_permission(without_invoker="allow")("deploy", nobody)
    assert has_permission(["a:b", "c:*"], "c:d")


@pytest.mark.parametrize(
    ("granted", "expected"),
    [
        ("artifacts:read:support", True),
        ("artifacts:*:support", True),
        ("artifacts:read", False),  # covers it outright: no narrowing
        ("artifacts:read:support:x", False),
        ("artifacts:write:support", False),
        ("runs:read:support", False),
    ],
)
def test_a_permission_narrows_another_by_one_more_segment(granted: str, expected: bool) -> None:
    assert has_narrowed_permission([granted], "artifacts:read") is expected
