"""``ChamviClient``'s shape: a small core of runs, the other families as attributes, the old names kept.

The old names are the methods ``ChamviClient`` had before issue 35 grouped them; each still answers
for one release, with a ``DeprecationWarning`` that says where the method is now.
"""

from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any, cast

import pytest
from temporalio.client import Client

import chamvi
from chamvi.approval_tokens import ApprovalTokens
from chamvi.client import ChamviClient
from chamvi.errors import ApprovalTokenInvalidError, InvalidInputError
from chamvi.models import ApprovalDecision

OLD_NAMES = {
    "send_message": "conversations.send",
    "wait_turn": "conversations.wait_turn",
    "turn_started": "conversations.turn_started",
    "conversation": "conversations.get",
    "conversation_messages": "conversations.messages",
    "list_conversations": "conversations.list",
    "delete_conversation": "conversations.delete",
    "approve": "approvals.approve",
    "resume": "approvals.resume",
    "pending_approval": "approvals.pending",
    "create_schedule": "schedules.create",
    "list_schedules": "schedules.list",
    "get_schedule": "schedules.get",
    "pause_schedule": "schedules.pause",
    "unpause_schedule": "schedules.unpause",
    "delete_schedule": "schedules.delete",
    "check_agent": "agents.check",
    "put_agent": "agents.put",
    "remove_agent": "agents.remove",
    "get_agent": "agents.get",
    "list_agents": "agents.list",
    "state_list": "state.list",
    "sync_knowledge": "knowledge.sync",
    "knowledge_state": "knowledge.state",
}
CORE = {
    "dispatch", "start", "get_run", "list_runs", "wait",
    "events", "cancel", "idle", "is_open", "agent_of",
}
FAMILIES = {"conversations", "approvals", "schedules", "agents", "state", "knowledge"}
SECRET = "s" * 40


def client(**options: Any) -> ChamviClient:
    """A client whose calls here never reach Temporal (each fails on its input first)."""
    return ChamviClient(cast(Client, object()), "test-queue", **options)


def new_place(chamvi_client: ChamviClient, path: str) -> Any:
    found: Any = chamvi_client
    for part in path.split("."):
        found = getattr(found, part)
    return found


@pytest.mark.parametrize(("old", "path"), sorted(OLD_NAMES.items()))
def test_an_old_method_name_warns_and_answers_the_method_in_its_family(old: str, path: str) -> None:
    chamvi_client = client()
    with pytest.warns(DeprecationWarning, match=rf"ChamviClient\.{old} is deprecated: use client\.{path}$"):
        method = getattr(chamvi_client, old)
    assert method == new_place(chamvi_client, path)


async def test_a_call_by_an_old_name_runs_the_new_method() -> None:
    with (
        pytest.warns(DeprecationWarning, match="use client.conversations.list"),
        pytest.raises(InvalidInputError, match="Not An Agent"),
    ):
        await client().list_conversations("Not An Agent")


async def test_chamvi_resume_warns_and_answers_through_the_clients_approvals() -> None:
    chamvi_client = client(approval_tokens=ApprovalTokens(SECRET))
    with (
        pytest.warns(DeprecationWarning, match=r"use client\.approvals\.resume\(token, decision\)"),
        pytest.raises(ApprovalTokenInvalidError),
    ):
        await chamvi.resume(chamvi_client, "ca1.forged.token", ApprovalDecision(approved=True))


async def test_approvals_by_token_refuse_a_client_built_without_the_workers_secret() -> None:
    with pytest.raises(InvalidInputError, match="approval_tokens=approval_tokens"):
        await client().approvals.pending("ca1.any.token")


def test_the_core_holds_the_runs_and_every_other_family_is_an_attribute() -> None:
    members = {name: value for name, value in vars(ChamviClient).items() if not name.startswith("_")}
    methods = {name for name, value in members.items() if inspect.isfunction(value)}
    families = {name for name, value in members.items() if isinstance(value, cached_property)}
    assert methods == CORE
    assert families == FAMILIES
    assert set(members) - methods - families == set(OLD_NAMES)


def test_a_family_is_made_once_per_client() -> None:
    chamvi_client = client()
    assert chamvi_client.conversations is chamvi_client.conversations
    assert chamvi_client.approvals is chamvi_client.approvals
