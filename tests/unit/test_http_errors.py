"""The error shape's ``Retry-After``: a 503 whose error says when to come back tells the client."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from chamvi.errors import ChamviError, InvalidInputError, UnavailableError
from chamvi.http.errors import install_error_handlers


async def _answer(error: ChamviError) -> httpx.Response:
    app = FastAPI()
    install_error_handlers(app)

    @app.get("/fail")
    async def fail() -> None:
        raise error

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as http:
        return await http.get("/fail")


@pytest.mark.parametrize(("retry_after", "header"), [(30, "30"), (4.2, "5"), (0.1, "1")])
async def test_a_503_that_knows_when_to_come_back_answers_retry_after_in_whole_seconds(
    retry_after: float, header: str
) -> None:
    answer = await _answer(UnavailableError("the queue is full", retry_after=retry_after))
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == header
    assert answer.json() == {"error": {"code": "unavailable", "message": "the queue is full"}}


@pytest.mark.parametrize(
    "error", [UnavailableError("no worker answered"), InvalidInputError("bad", retry_after=3)]
)
async def test_an_error_that_does_not_say_when_or_is_no_503_has_no_retry_after(error: ChamviError) -> None:
    answer = await _answer(error)
    assert "Retry-After" not in answer.headers
