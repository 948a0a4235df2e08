"""``ValidationError.issues``: the field-by-field problems, from pydantic to a failed run's error."""

from __future__ import annotations

import pytest
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from temporalio.api.failure.v1 import Failure
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.exceptions import ApplicationError

from chamvi._activity_boundary import as_failure
from chamvi.errors import ChamviValidationError, ValidationIssue, describe_issues, validation_issues
from chamvi.models import ErrorInfo
from workflows._calls import failure as run_failure


class Refund(BaseModel):
    order_id: str
    amount: float
    lines: list[int] = []


def refused(value: object) -> tuple[ValidationIssue, ...]:
    with pytest.raises(PydanticValidationError) as error:
        Refund.model_validate(value)
    return validation_issues(error.value.errors(include_input=False))


def test_pydantic_errors_become_issues_with_a_path_a_message_and_a_code_but_no_value() -> None:
    issues = refused({"amount": "a lot", "lines": [1, "two"]})

    assert [(i.path, i.code) for i in issues] == [
        (("order_id",), "missing"),
        (("amount",), "float_parsing"),
        (("lines", 1), "int_parsing"),
    ]
    assert "a lot" not in repr(issues) and "two" not in repr(issues)
    assert describe_issues(issues).startswith("order_id: Field required; amount: Input should be")
    assert ValidationIssue((), "not an object", "model_type").where == "value"


async def test_issues_cross_the_activity_boundary_and_reach_the_runs_error() -> None:
    issues = refused({"order_id": "A-1", "amount": []})
    failure = Failure()
    error = ChamviValidationError("bad", issues=issues)
    await pydantic_data_converter.encode_failure(as_failure(error), failure)
    decoded = await pydantic_data_converter.decode_failure(failure)
    assert isinstance(decoded, ApplicationError)

    run_failed = run_failure(decoded)

    assert (run_failed.code, run_failed.issues) == ("validation_error", list(issues))
    recorded = ErrorInfo(code=run_failed.code, message=run_failed.message, issues=run_failed.issues)
    assert ErrorInfo.model_validate_json(recorded.model_dump_json()) == recorded


def test_an_error_without_issues_is_stored_as_before() -> None:
    stored = ErrorInfo(code="timeout", message="late").model_dump_json()
    assert stored == '{"code":"timeout","message":"late"}'
    plain = run_failure(ApplicationError("down", type="provider_unavailable"))
    assert plain.issues is None
