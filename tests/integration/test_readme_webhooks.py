"""The tour's webhook commands (docs/tutorial.md), run as a reader would: curl and openssl, a real stack."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from chamvi import ChamviClient, RunStatus
from chamvi.http import create_api
from examples.support.app import app
from tests.support.docs import shell_block
from tests.support.http_api import make_tokens, serving

ROOT = Path(__file__).resolve().parents[2]


def tour_block() -> str:
    """The tour's shell block that signs and sends a ticket."""
    return shell_block("tutorial.md", "openssl dgst")


async def sh(script: str) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if k != "CHAMVI_TICKETS_SECRET"}
    process = await asyncio.create_subprocess_exec(
        "bash", "-c", script, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await process.communicate()
    return process.returncode or 0, out.decode()


@pytest.mark.skipif(not (shutil.which("curl") and shutil.which("openssl")), reason="needs curl and openssl")
async def test_the_tours_signed_curl_starts_the_ticket_desk_and_a_second_send_starts_nothing(
    chamvi: ChamviClient, running_worker
) -> None:
    api = create_api(tokens=list(make_tokens(admin=["*"]).values()), managed=None, runs=chamvi, inbound=app)
    async with running_worker(app), serving(api) as url:
        script = tour_block().rstrip().replace("http://localhost:3000", url)
        code, first = await sh(script + ' -w " %{http_code}"')
        assert code == 0 and first.endswith(" 202"), first
        again_code, again = await sh(script + ' -w " %{http_code}"')
        assert again_code == 0 and again.endswith(" 200"), again
        started = json.loads(first.rsplit(" ", 1)[0])
        assert json.loads(again.rsplit(" ", 1)[0])["runs"][0]["run_id"] == started["runs"][0]["run_id"]
        (run_ref,) = started["runs"]
        assert (run_ref["agent"], run_ref["subscription"]) == ("ticket-desk", "new-tickets")
        run = await chamvi.wait(run_ref["run_id"])
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.trigger.address == "ticket-42"
    assert [s.output for s in run.steps if s.kind == "tool"] == ["routed to shipping"]
