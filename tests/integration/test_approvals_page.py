"""The approvals page (/ui) in a real headless Chromium against a real worker and API.

Debian's ``chromium`` driven by Playwright from PyPI (no browser download): a person logs in once,
sees a waiting run appear without reloading, answers it, and sees the run complete.
"""

from __future__ import annotations

import re
import shutil
import threading
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx
import pytest
from playwright.async_api import Browser, Locator, Page, async_playwright, expect
from temporalio.client import Client

from chamvi import App, ApprovalTokens, ChamviClient, RunStatus, ToolContext, approve, define_agent, tool
from chamvi.http import Token, create_api
from chamvi.providers import ModelRegistry, OpenAIProvider, ScriptedModel, call, reply
from chamvi.runtime import build_worker, local_plugin
from tests.integration.test_approval_tokens import SECRET as APPROVAL_SECRET
from tests.integration.test_approval_tokens import make_app as console_app
from tests.polling import SLOW_PATIENCE_SECONDS, SLOW_TEST_TIMEOUT, until_status
from tests.support.http_api import bearer, make_tokens, runs_api, serving
from tests.support.openai_server import OpenAIServer, Reasoning, stream, tool_call

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
NO_CHROMIUM = "Debian's chromium is not installed: `apt-get install chromium` (scripts/test does when it can)"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PATIENCE_MS = int(SLOW_PATIENCE_SECONDS * 1000)
"""How long the page may take to show what the run did (a bound on waiting, not a measured time)."""

pytestmark = [
    pytest.mark.skipif(shutil.which("chromium") is None, reason=NO_CHROMIUM),
    pytest.mark.timeout(SLOW_TEST_TIMEOUT),  # each test waits on the browser several times
]


@tool
async def refund(order: str, amount: int, ctx: ToolContext) -> str:
    """Refunds an order after a person approves."""
    decision = await approve(
        ctx,
        title=f"Refund {amount} EUR on order {order}?",
        body="Parcel lost in transit.\nCustomer since 2019.",
    )
    return f"refunded {order}" if decision.approved else f"not refunded: {decision.reason}"


def make_app(agent: str) -> App:
    models = ModelRegistry()
    models.register(
        "scripted/refunder",
        ScriptedModel([call("refund", "call-1", order="A-1042", amount=40), reply("The refund is done.")]),
    )
    return App(
        agents=[define_agent(name=agent, model="scripted/refunder", instructions="Refund.", tools=[refund])],
        models=models,
    )


@dataclass
class Stack:
    url: str
    tokens: dict[str, Token]
    agent: str
    browser: Browser

    async def dispatch(self) -> str:
        async with httpx.AsyncClient(base_url=self.url, headers=bearer(self.tokens["support"])) as http:
            response = await http.post("/runs", json={"agent": self.agent})
        assert response.status_code == 202, response.text
        return str(response.json()["run_id"])

    async def log_in(self, page: Page, token: str) -> None:
        await page.goto(f"{self.url}/ui")
        await page.fill("#token", self.tokens[token].value)
        await page.click("#login-form button[type=submit]")


@asynccontextmanager
async def page_stack(
    client: Client, task_queue: str, app: App, tokens: dict[str, Token], agent: str
) -> AsyncIterator[Stack]:
    """A worker for ``app``, the runs API and a headless Chromium, for one test."""
    api = runs_api(tokens, client, task_queue, agents=list(app.agents))
    async with (
        build_worker(client, app, task_queue=task_queue),
        serving(api) as url,
        async_playwright() as playwright,
    ):
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield Stack(url, tokens, agent, browser)
        finally:
            await browser.close()


@pytest.fixture
async def stack(client: Client, task_queue: str) -> AsyncIterator[Stack]:
    # the agent's name is unique to the test: the page lists every waiting run in the namespace
    agent = f"refunder-{uuid.uuid4().hex[:8]}"
    tokens = make_tokens(
        approver=["runs:read", "runs:approve"], support=["runs:dispatch", "runs:read"], reader=["runs:read"]
    )
    async with page_stack(client, task_queue, make_app(agent), tokens, agent) as running:
        yield running


def card_of(page: Page, run_id: str) -> Locator:
    return page.locator(f'#waiting li.card[data-run-id="{run_id}"]')


async def test_a_person_logs_in_sees_a_waiting_run_appear_approves_it_and_sees_it_complete(
    stack: Stack,
) -> None:
    page = await stack.browser.new_page()
    await stack.log_in(page, "approver")
    await expect(page.locator("#none-waiting")).to_be_visible(timeout=PATIENCE_MS)
    await page.evaluate("window.notReloaded = true")

    run_id = await stack.dispatch()
    card = card_of(page, run_id)
    await expect(card).to_be_visible(timeout=PATIENCE_MS)
    await expect(card.locator(".question")).to_have_text("Refund 40 EUR on order A-1042?")
    await expect(card.locator(".body")).to_have_text("Parcel lost in transit.\nCustomer since 2019.")
    await expect(card.locator(".tool")).to_have_text("refund")
    await expect(card.locator(".input")).to_have_text('{"order":"A-1042","amount":40}')
    await expect(card.locator(".invoker")).to_have_text("support (token)")
    await expect(card.locator(".deadline")).to_contain_text("then denied")
    await expect(card.locator(".agent")).to_have_text(stack.agent)

    # the run's steps so far, followed through its event stream
    await card.locator("a.run").click()
    await expect(page.locator("#run-status")).to_have_text("waiting", timeout=PATIENCE_MS)
    await expect(page.locator("#run-live")).to_contain_text("Live: following the run's events")
    await expect(page.locator("#steps li[data-kind=llm]")).to_contain_text("model (calls refund)")
    await expect(page.locator("#steps li[data-kind=waiting]")).to_have_text(
        "waiting for approval: Refund 40 EUR on order A-1042?"
    )

    await card.locator(".reason").fill("lost parcel, checked with the carrier")
    await card.locator("button.approve").click()
    await expect(page.locator("#run-id")).to_have_text(run_id, timeout=PATIENCE_MS)
    await expect(page.locator("#run-status")).to_have_text("completed", timeout=PATIENCE_MS)
    await expect(page.locator("#steps li[data-kind=wait]")).to_have_text(
        "approval approved by approver (token): lost parcel, checked with the carrier"
    )
    await expect(page.locator("#steps li[data-kind=tool]")).to_contain_text("refunded A-1042")
    await expect(page.locator("#run-outcome")).to_have_text("output: The refund is done.")
    await expect(card).to_have_count(0)
    await expect(page.locator("#run-live")).to_have_text("The run has ended.")
    assert await page.evaluate("window.notReloaded") is True

    # the token was entered once: a reload keeps it for the tab
    await page.reload()
    await expect(page.locator("#main")).to_be_visible(timeout=PATIENCE_MS)
    await expect(page.locator("#login")).to_be_hidden()


async def test_a_denial_carries_its_reason_and_the_run_goes_on_without_the_tool(stack: Stack) -> None:
    page = await stack.browser.new_page()
    await stack.log_in(page, "approver")
    run_id = await stack.dispatch()
    card = card_of(page, run_id)
    await expect(card).to_be_visible(timeout=PATIENCE_MS)
    await card.locator(".reason").fill("refunded twice already")
    await card.locator("button.deny").click()
    await expect(page.locator("#run-status")).to_have_text("completed", timeout=PATIENCE_MS)
    await expect(page.locator("#steps li[data-kind=wait]")).to_have_text(
        "approval denied by approver (token): refunded twice already"
    )
    await expect(page.locator("#steps li[data-kind=tool]")).to_contain_text(
        "not refunded: refunded twice already"
    )


async def test_a_wrong_token_is_refused_and_a_token_without_approve_sees_why_its_answer_fails(
    stack: Stack,
) -> None:
    page = await stack.browser.new_page()
    await page.goto(f"{stack.url}/ui")
    await page.fill("#token", "not-a-token")
    await page.click("#login-form button[type=submit]")
    await expect(page.locator("#login-error")).to_contain_text("unknown bearer token", timeout=PATIENCE_MS)
    await expect(page.locator("#main")).to_be_hidden()

    await page.fill("#token", stack.tokens["reader"].value)
    await page.click("#login-form button[type=submit]")
    run_id = await stack.dispatch()
    card = card_of(page, run_id)
    await expect(card).to_be_visible(timeout=PATIENCE_MS)
    await card.locator("button.approve").click()
    await expect(card.locator(".answer-error")).to_have_text(
        "token 'reader' lacks the permission 'runs:approve' this route needs", timeout=PATIENCE_MS
    )
    await expect(card).to_be_visible()


async def test_the_page_loads_without_a_token_and_may_load_or_call_nothing_but_this_server(
    stack: Stack,
) -> None:
    async with httpx.AsyncClient(base_url=stack.url) as http:
        redirect = await http.get("/ui")
        page = await http.get("/ui/")
        script = await http.get("/ui/app.js")
        runs = await http.get("/runs")
    assert redirect.status_code == 308 and redirect.headers["location"] == "/ui/"
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="app.js" defer></script>' in page.text
    policy = page.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "script-src 'self'" in policy and "connect-src 'self'" in policy
    assert script.headers["content-type"].startswith("text/javascript")
    assert "sessionStorage" in script.text
    assert runs.status_code == 401  # the data stays behind the token


async def test_below_a_base_path_the_page_finds_the_api_beside_it(
    client: Client, task_queue: str, stack: Stack
) -> None:
    api = runs_api(stack.tokens, client, task_queue, base_path="/chamvi")
    run_id = await stack.dispatch()
    async with serving(api) as url:
        page = await stack.browser.new_page()
        await page.goto(f"{url}/chamvi/ui")
        await page.fill("#token", stack.tokens["approver"].value)
        await page.click("#login-form button[type=submit]")
        await expect(card_of(page, run_id)).to_be_visible(timeout=PATIENCE_MS)
        assert page.url == f"{url}/chamvi/ui/"


async def test_a_watched_run_shows_the_models_words_while_it_writes_them(
    client: Client, task_queue: str, stack: Stack
) -> None:
    connected, rest = threading.Event(), threading.Event()
    with OpenAIServer() as server:
        server.add(
            tool_call("refund", {"order": "A-7", "amount": 5}),
            stream(connected, Reasoning("refund approved, "), "The refund ", rest, "is done."),
        )
        try:
            provider = OpenAIProvider(api_key="test", base_url=server.url + "/v1")
            agent = f"writer-{uuid.uuid4().hex[:8]}"
            app = App(
                agents=[
                    define_agent(
                        name=agent, model="openai/test-model", instructions="Refund.", tools=[refund]
                    )
                ],
                models=ModelRegistry(providers={"openai": provider.model}),
            )
            # worker and API in one process, as `chamvi dev` runs them: the stream carries the deltas
            queue = f"{task_queue}-streaming"  # the stack's worker serves the test's own queue
            plugin = local_plugin(app)
            api = runs_api(stack.tokens, client, queue, agents=[agent], events=plugin.runtime.events)
            async with build_worker(client, plugin, task_queue=queue), serving(api) as url:
                page = await stack.browser.new_page()
                await page.goto(f"{url}/ui")
                await page.fill("#token", stack.tokens["approver"].value)
                await page.click("#login-form button[type=submit]")
                async with httpx.AsyncClient(base_url=url, headers=bearer(stack.tokens["support"])) as http:
                    run_id = (await http.post("/runs", json={"agent": agent})).json()["run_id"]
                await card_of(page, run_id).locator("button.approve").click(timeout=PATIENCE_MS)
                # the page listens before the model writes: deltas are not stored, a late listener misses them
                received = re.compile(r"\((\d+) received\)")
                await expect(page.locator("#run-live")).to_have_text(received, timeout=PATIENCE_MS)
                connected.set()
                writing = page.locator("#steps li[data-kind=delta]")
                await expect(writing.locator(".text")).to_have_text("The refund ", timeout=PATIENCE_MS)
                await expect(writing.locator(".reasoning")).to_have_text("refund approved, ")
                await expect(page.locator("#run-status")).to_have_text("running")
                rest.set()
                await expect(page.locator("#run-status")).to_have_text("completed", timeout=PATIENCE_MS)
                await expect(page.locator("#run-outcome")).to_have_text("output: The refund is done.")
                await expect(writing).to_have_count(0)  # the step's record took its place
        finally:
            connected.set()
            rest.set()


@dataclass
class TokenStack:
    url: str
    tokens: dict[str, Token]
    runs: ChamviClient
    lines: list[str]
    browser: Browser

    async def link(self) -> tuple[str, str]:
        """Dispatches a run and waits for its console request; the run's id and the request's link."""
        run_id = (await self.runs.dispatch("operator")).run_id
        await until_status(self.runs, run_id, RunStatus.WAITING)
        found = re.search(r"^Approve or deny: (\S+)$", "\n".join(self.lines), re.MULTILINE)
        assert found is not None, self.lines
        return run_id, found.group(1)


@pytest.fixture
async def token_stack(client: Client, task_queue: str) -> AsyncIterator[TokenStack]:
    """A worker whose console requests link to the API's page, the API checking the same secret."""
    lines: list[str] = []
    tokens = make_tokens(approver=["runs:read", "runs:approve"])
    runs = ChamviClient(client, task_queue=task_queue, approval_tokens=ApprovalTokens(APPROVAL_SECRET))
    api = create_api(tokens=list(tokens.values()), managed=None, runs=runs, agents=["operator"])
    async with serving(api) as url:
        linking = ApprovalTokens(APPROVAL_SECRET, public_url=url)
        async with (
            build_worker(
                client, local_plugin(console_app(lines), approval_tokens=linking), task_queue=task_queue
            ),
            async_playwright() as playwright,
        ):
            browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                yield TokenStack(url, tokens, runs, lines, browser)
            finally:
                await browser.close()


async def test_the_link_in_a_channels_request_opens_that_approval_and_answers_it_once(
    token_stack: TokenStack,
) -> None:
    run_id, link = await token_stack.link()
    assert link.startswith(f"{token_stack.url}/ui/#answer=ca1.")
    page = await token_stack.browser.new_page()
    await page.goto(link)
    card = page.locator("#token-card")
    await expect(card.locator(".question")).to_have_text("Restart api?", timeout=PATIENCE_MS)
    await expect(card.locator(".body")).to_have_text("Everyone is logged out.")
    await expect(card.locator(".tool")).to_have_text("restart")
    await expect(card.locator(".agent")).to_have_text("operator")
    await expect(card.locator(".deadline")).to_contain_text("then denied")
    await expect(page.locator("#login")).to_be_hidden()

    await card.locator(".reason").fill("checked the dashboards")
    await card.locator("button.approve").click()
    await expect(page.locator("#token-done")).to_have_text("Approved: the run goes on.", timeout=PATIENCE_MS)
    assert page.url == f"{token_stack.url}/ui/"  # the used token left the address bar
    run = await token_stack.runs.wait(run_id)
    assert next(s for s in run.steps if s.kind == "tool").output == "restarted api (approved by token holder)"
    decision = next(s for s in run.steps if s.kind == "wait").decision
    assert decision is not None and decision.reason == "checked the dashboards"

    again = await token_stack.browser.new_page()
    await again.goto(link)
    await expect(again.locator("#token-status")).to_have_attribute(
        "data-code", "approval_not_pending", timeout=PATIENCE_MS
    )
    await expect(again.locator("#token-status")).to_contain_text("not pending any more")
    await expect(again.locator("#token-card")).to_be_hidden()
    forged = await token_stack.browser.new_page()
    await forged.goto(link[:-4] + "AAAA")
    await expect(forged.locator("#token-status")).to_have_attribute(
        "data-code", "approval_token_invalid", timeout=PATIENCE_MS
    )


async def test_a_person_signed_in_on_the_page_who_opens_a_link_is_recorded_as_the_approver(
    token_stack: TokenStack,
) -> None:
    run_id, link = await token_stack.link()
    page = await token_stack.browser.new_page()
    await page.goto(f"{token_stack.url}/ui")
    await page.fill("#token", token_stack.tokens["approver"].value)
    await page.click("#login-form button[type=submit]")
    await expect(page.locator("#main")).to_be_visible(timeout=PATIENCE_MS)
    await page.goto(link)
    card = page.locator("#token-card")
    await card.locator(".reason").fill("not during the sale", timeout=PATIENCE_MS)
    await card.locator("button.deny").click()
    await expect(page.locator("#token-done")).to_have_text(
        "Denied: the run goes on without it.", timeout=PATIENCE_MS
    )
    run = await token_stack.runs.wait(run_id)
    decision = next(s for s in run.steps if s.kind == "wait").decision
    assert decision is not None and decision.approver is not None
    assert (decision.approver.id, decision.approver.kind, decision.approved) == ("approver", "token", False)


@tool
async def inventory() -> dict[str, str]:
    """Lists the warehouse's stock: a result of forty lines."""
    return {
        f"item-{i:02d}": f"shelf {i}, {'a long description without spaces ' * 3}".strip() for i in range(40)
    }


async def test_a_long_tool_result_folds_nothing_overflows_at_1280_px_and_no_invoker_says_so(
    client: Client, task_queue: str
) -> None:
    agent = f"stocker-{uuid.uuid4().hex[:8]}"
    models = ModelRegistry()
    script = [call("inventory", "c-1"), call("refund", "c-2", order="A-7", amount=5), reply("Done.")]
    models.register("scripted/stocker", ScriptedModel(script))
    app = App(
        agents=[
            define_agent(
                name=agent, model="scripted/stocker", instructions="Stock.", tools=[inventory, refund]
            )
        ],
        models=models,
    )
    tokens = make_tokens(approver=["runs:read", "runs:approve"])
    async with page_stack(client, task_queue, app, tokens, agent) as running:
        # dispatched by a client with no invoker (a script, a schedule of old)
        run_id = (await ChamviClient(client, task_queue=task_queue).dispatch(agent)).run_id
        page = await running.browser.new_page(viewport={"width": 1280, "height": 800})
        await page.goto(f"{running.url}/ui")
        await page.fill("#token", tokens["approver"].value)
        await page.click("#login-form button[type=submit]")
        card = card_of(page, run_id)
        await expect(card).to_be_visible(timeout=PATIENCE_MS)
        await expect(card.locator(".invoker")).to_have_text("none (started without an invoker)")
        await card.locator("a.run").click()
        tool_step = page.locator("#steps li[data-kind=tool]").first
        await expect(tool_step).to_contain_text("tool inventory({})", timeout=PATIENCE_MS)
        result = tool_step.locator(".result")
        await expect(result).to_have_class(re.compile(r"\bfolded\b"))
        assert (await result.inner_text()).count("item-") == 5  # the opening brace, then five items
        await expect(tool_step.locator("button.show-all")).to_have_text("show all (42 lines)")
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the page is {width} px wide in a 1280 px window"
        await tool_step.locator("button.show-all").click()
        await expect(tool_step.locator("button.show-all")).to_have_count(0)
        assert (await result.inner_text()).count("item-") == 40
        # the run's next event redraws its steps: the result stays unfolded
        await card.locator("button.approve").click()
        await expect(page.locator("#run-status")).to_have_text("completed", timeout=PATIENCE_MS)
        assert (await result.inner_text()).count("item-") == 40
        width = await page.evaluate("document.documentElement.scrollWidth")
        assert width <= 1280, f"the unfolded result makes the page {width} px wide"
