"""The server `chamvi api` runs, as a client and an operator meet it: raw requests and its access log."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from fastapi import FastAPI
from temporalio.client import Client

from chamvi import ChamviClient
from chamvi.http import Token, create_api
from chamvi.http.server import ACCESS_LOGGER
from tests.support.http_api import bearer, make_tokens, serving

SECRET = "s3cret-in-the-url"


@pytest.fixture
def tokens() -> dict[str, Token]:
    return make_tokens(admin=["*"])


@pytest.fixture
def api(client: Client, task_queue: str, tokens: dict[str, Token]) -> FastAPI:
    # no agent is served: a dispatch that got through would answer 404 without starting a run
    runs = ChamviClient(client, task_queue=task_queue)
    return create_api(tokens=list(tokens.values()), managed=None, runs=runs, agents=[])


@contextmanager
def access_log(caplog: pytest.LogCaptureFixture) -> Iterator[list[str]]:
    """uvicorn's access log lines; its logger does not propagate, and a server's start resets its
    handlers, so the capture joins it once the server runs."""
    logger = logging.getLogger(ACCESS_LOGGER)
    logger.addHandler(caplog.handler)
    lines: list[str] = []
    try:
        yield lines
    finally:
        logger.removeHandler(caplog.handler)
        lines.extend(r.getMessage() for r in caplog.records if r.name == ACCESS_LOGGER)


async def test_the_access_log_never_carries_a_query_string(
    api: FastAPI, tokens: dict[str, Token], caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(api, log_level="info") as url, httpx.AsyncClient(base_url=url) as http:
        with access_log(caplog) as lines:
            refused = await http.get("/runs", params={"token": SECRET})
            listed = await http.get(
                "/runs", params={"limit": 1, "access_token": SECRET}, headers=bearer(tokens["admin"])
            )
    assert (refused.status_code, listed.status_code) == (401, 200)
    assert [line.split('"')[1] for line in lines] == ["GET /runs HTTP/1.1"] * 2
    assert SECRET not in caplog.text


async def test_a_request_with_both_transfer_encoding_and_content_length_answers_400_and_closes(
    api: FastAPI, tokens: dict[str, Token]
) -> None:
    body = json.dumps({"agent": "nobody"}).encode()
    chunked = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
    authorization = f"Authorization: Bearer {tokens['admin'].value}\r\n".encode()
    smuggled = b"GET /runs HTTP/1.1\r\nHost: api\r\n" + authorization + b"Connection: close\r\n\r\n"
    request = (
        b"POST /runs HTTP/1.1\r\nHost: api\r\n"
        + authorization
        + b"Content-Type: application/json\r\n"
        + b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n" % len(chunked)
        + chunked
    )
    async with serving(api) as url:
        host, port = url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            writer.write(request + smuggled)
            await writer.drain()
            # the server closes the connection: everything it sends ends in EOF
            answered = await asyncio.wait_for(reader.read(), timeout=30)
        finally:
            writer.close()
    head, _, content = answered.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and answered.count(b"HTTP/1.1 ") == 1
    assert b"connection: close" in head.lower()
    error = json.loads(content)["error"]
    assert error["code"] == "bad_request"
    assert error["message"] == "the request has both Transfer-Encoding and Content-Length: send one of them"
