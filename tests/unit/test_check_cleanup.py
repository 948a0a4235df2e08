"""A check's workflow is deleted even when the server refuses the first deletes (issue 41 item 7)."""

from __future__ import annotations

import logging
from typing import Any, cast

import pytest
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from chamvi import client as client_module
from chamvi.client import FORGET_ATTEMPTS, ChamviClient


class RefusingService:
    """A workflow service whose first ``refusals`` deletes fail as a loaded server's do."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals
        self.deletes: list[str] = []

    async def delete_workflow_execution(self, request: DeleteWorkflowExecutionRequest) -> None:
        self.deletes.append(request.workflow_execution.workflow_id)
        if len(self.deletes) <= self.refusals:
            raise RPCError("context deadline exceeded", RPCStatusCode.DEADLINE_EXCEEDED, b"")


def chamvi_over(service: RefusingService) -> ChamviClient:
    temporal: Any = type("TemporalClient", (), {"namespace": "default", "workflow_service": service})()
    return ChamviClient(cast(Client, temporal))


@pytest.fixture(autouse=True)
def no_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(client_module, "FORGET_FIRST_PAUSE_SECONDS", 0.0)


async def test_a_refused_delete_of_a_check_is_tried_again_until_it_takes() -> None:
    service = RefusingService(refusals=2)
    await chamvi_over(service)._forget("agent-check-1")
    assert service.deletes == ["agent-check-1"] * 3


async def test_a_delete_refused_every_time_is_logged_naming_the_workflow(
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = RefusingService(refusals=FORGET_ATTEMPTS)
    with caplog.at_level(logging.WARNING, logger="chamvi.client"):
        await chamvi_over(service)._forget("agent-check-2")
    assert len(service.deletes) == FORGET_ATTEMPTS
    assert [r.getMessage() for r in caplog.records] == [
        f"could not delete workflow 'agent-check-2' after {FORGET_ATTEMPTS} attempts, left to the "
        "namespace's retention: context deadline exceeded (DEADLINE_EXCEEDED)"
    ]
