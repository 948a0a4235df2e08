"""The chat view of the page (/ui) in a real headless Chromium against a real worker and API: pick an
agent, start a conversation, write, watch the answer stream in, see tool calls, answer an approval in
place, reopen the conversation; a waiting turn on the approvals list shows the conversation."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, async_playwright, expect
from temporalio.client import Client

from chamvi import ChamviClient
from chamvi.artifacts import ArtifactStore
from chamvi.http import Token, create_api
from chamvi.runtime import build_worker, local_plugin
from tests.apps.chat import make_app
from tests.integration.test_approvals_page import CHROMIUM, CHROMIUM_ARGS, NO_CHROMIUM, PATIENCE_MS
from tests.polling import SLOW_TEST_TIMEOUT
from tests.support.http_api import bearer, make_tokens, serving

pytestmark = [
    pytest.mark.skipif(shutil.which("chromium") is None, reason=NO_CHROMIUM),
    pytest.mark.timeout(SLOW_TEST_TIMEOUT),  # each test waits on the browser several times
]


@dataclass
class Stack:
    url: str
    tokens: dict[str, Token]
    browser: Browser

    async def log_in(self, page: Page, token: str = "person") -> None:
        await page.goto(f"{self.url}/ui")
        await page.fill("#token", self.tokens[token].value)
        await page.click("#login-form button[type=submit]")
        await expect(page.locator("#tabs")).to_be_visible(timeout=PATIENCE_MS)


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    store = ArtifactStore.memory()
    plugin = local_plugin(make_app(), artifacts=store)
    tokens = make_tokens(
        person=["conversations:read", "conversations:write", "runs:read", "runs:approve"],
        approver=["runs:read", "runs:approve", "conversations:read"],
    )
    api = create_api(
        tokens=list(tokens.values()),
        managed=None,
        runs=ChamviClient(client, task_queue=task_queue, artifacts=store),
        agents=list(plugin.app.agents),
        events=plugin.runtime.events,  # worker and API in one process, as `chamvi dev` runs them
    )
    async with (
        build_worker(client, plugin, task_queue=task_queue),
        serving(api) as url,
        async_playwright() as playwright,
    ):
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield Stack(url, tokens, browser)
        finally:
            await browser.close()


async def _write(page: Page, text: str) -> None:
    await page.fill("#chat-text", text)
    await page.click("#chat-send")


def _answer(page: Page, turn: int) -> Locator:
    return page.locator(f'#chat-messages li.message.assistant[data-turn="{turn}"] .text')


async def test_a_person_chats_sees_the_answer_stream_answers_an_approval_in_place_and_reopens_it(
    stack: Stack,
) -> None:
    page = await stack.browser.new_page()
    await stack.log_in(page)
    await page.click("#tab-chat")
    await expect(page.locator("#chat-agent")).to_have_value("chat", timeout=PATIENCE_MS)
    await page.click("#chat-new")
    conversation = await page.locator("#chat-id").text_content()
    assert conversation and conversation.startswith("c-")

    await _write(page, "Can I get a refund?")
    await expect(_answer(page, 0)).to_have_text("re: Can I get a refund? | earlier: []", timeout=PATIENCE_MS)
    await expect(page.locator('li.message.user[data-turn="0"]')).to_have_text("Can I get a refund?")

    # the answer streams in: the slow model's first words are there while it still writes
    await _write(page, "stream the follow-up")
    writing = page.locator('#chat-messages li.message.assistant.writing[data-turn="1"]')
    await expect(writing).to_contain_text("re:", timeout=PATIENCE_MS)
    await expect(_answer(page, 1)).to_have_text(
        "re: stream the follow-up | earlier: ['Can I get a refund?']", timeout=PATIENCE_MS
    )
    await expect(writing).to_have_count(0)

    # a tool that asks a person: the question in place, answered there, the tool call on its line
    await _write(page, "refund my order")
    approval = page.locator('#chat-messages li.approval[data-turn="2"]')
    await expect(approval.locator(".question")).to_have_text(
        "Refund 25.00 on order A-1001?", timeout=PATIENCE_MS
    )
    await approval.locator("button.approve").click()
    await expect(page.locator('#chat-messages li.message.tool[data-turn="2"]')).to_have_text(
        'refund_order({"order_id":"A-1001","amount":25}) → refunded 25.00', timeout=PATIENCE_MS
    )
    await expect(_answer(page, 2)).to_contain_text("tools: ['refunded 25.00']", timeout=PATIENCE_MS)
    await expect(approval).to_have_count(0)

    # reopened later: the conversation is listed and shows what was said
    await page.reload()
    await page.click("#tab-chat")
    link = page.locator(f'#chat-conversations a[data-conversation="{conversation}"]')
    await expect(link).to_be_visible(timeout=PATIENCE_MS)
    await link.click()
    await expect(page.locator("#chat-messages li.message.user")).to_have_count(3, timeout=PATIENCE_MS)
    await expect(_answer(page, 1)).to_have_text("re: stream the follow-up | earlier: ['Can I get a refund?']")
    await _write(page, "thanks")
    await expect(_answer(page, 3)).to_have_text(
        "re: thanks | earlier: ['Can I get a refund?', 'stream the follow-up', 'refund my order']",
        timeout=PATIENCE_MS,
    )


async def test_a_waiting_turn_on_the_approvals_list_shows_the_conversations_last_messages(
    stack: Stack,
) -> None:
    async with httpx.AsyncClient(base_url=stack.url, headers=bearer(stack.tokens["person"])) as http:
        conversation = f"c-{uuid.uuid4().hex[:10]}"
        path = f"/conversations/chat/{conversation}/messages"
        first = await http.post(path, json={"text": "My parcel never came."})
        assert first.status_code in (200, 202), first.text
        asking = (await http.post(path, json={"text": "refund it please"})).json()
    page = await stack.browser.new_page()
    await stack.log_in(page, "approver")
    card = page.locator(f'#waiting li.card[data-run-id="{asking["run_id"]}"]')
    await expect(card).to_be_visible(timeout=PATIENCE_MS)
    await expect(card.locator(".question")).to_have_text("Refund 25.00 on order A-1001?")
    await expect(card.locator(".conversation-id")).to_have_text(conversation)
    await expect(card.locator(".conversation-messages li")).to_have_text(
        [
            "person: My parcel never came.",
            "agent: re: My parcel never came. | earlier: []",
            "person: refund it please",
        ],
        timeout=PATIENCE_MS,
    )
    await card.locator("button.approve").click()
    await expect(card).to_have_count(0, timeout=PATIENCE_MS)
