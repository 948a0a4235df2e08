"""GitHub: webhook deliveries in (``X-Hub-Signature-256``), comments on the issue or pull request out.

Inbound, GitHub signs the raw body only: ``X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the body
under the webhook's secret>``. ``X-GitHub-Event`` is the event type (``issues``, ``pull_request``),
``X-GitHub-Delivery`` the delivery's GUID. A ``ping`` (sent when the webhook is created) answers 200
and starts nothing. Deliveries come as ``application/json`` or as
``application/x-www-form-urlencoded`` with the JSON in a ``payload`` field; either way the signature
is over the bytes as sent.

GitHub's deliveries carry no timestamp, and their GUID is inside no signature (GitHub's own docs say
so), so neither a stale delivery nor one resent under an invented GUID can be refused. The runs a
delivery starts are therefore keyed by the signed body (its SHA-256) by default: GitHub's redelivery
(the same GUID and body) and a captured request resent under a new GUID answer the runs the first
started, and start nothing new. Two genuinely distinct deliveries with byte-identical bodies start
one run; GitHub's payloads differ from one event to the next (timestamps, ids, counters) except for
those that carry only what the sender chose (``repository_dispatch`` and ``workflow_dispatch`` sent
twice with the same inputs): for those, add a unique field, or key by the GUID with
``GitHubWebhooks(key="delivery")`` and accept that a replay under a new GUID starts a run.

Outbound, :class:`GitHubComments` answers on the issue or pull request the event came from (the
address ``owner/repo#123``) through the REST API, with the message's effect marker in the comment: a
retried attempt (the worker died, or GitHub's answer was lost after it saved the comment) finds the
comment a crashed attempt posted and does not post it twice.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

from temporalio import activity

from chamvi.channels import ChannelMessage
from chamvi.errors import ChamviValidationError, ChannelDeliveryError, WebhookSignatureError
from chamvi.senders import _http
from chamvi.senders._base import (
    FORM,
    WebhookAnswer,
    WebhookEvent,
    WebhookRequest,
    any_matches,
    form_payload,
    hmac_sha256,
    json_body,
)
from chamvi.settings import Settings
from chamvi.tools import effect_marker

SIGNATURE_HEADER = "X-Hub-Signature-256"
EVENT_HEADER = "X-GitHub-Event"
DELIVERY_HEADER = "X-GitHub-Delivery"
API_VERSION = "2022-11-28"
_ADDRESS = re.compile(r"^(?P<owner>[A-Za-z0-9_.-]+)/(?P<repo>[A-Za-z0-9_.-]+)#(?P<number>[0-9]+)$")
_SEARCHED_PAGES = 3
"""Pages of 100 comments a retry reads for its marker: the first two and the last."""


def github_signature(secret: str, body: bytes) -> str:
    """``sha256=<hex>``: what GitHub sends in ``X-Hub-Signature-256`` for ``body``."""
    return "sha256=" + hmac_sha256(secret.encode(), body).hex()


def issue_address(payload: Any) -> str | None:
    """``owner/repo#number`` of the issue or pull request an event is about, when it is about one."""
    if not isinstance(payload, dict):
        return None
    repository = payload.get("repository")
    name = repository.get("full_name") if isinstance(repository, dict) else None
    number = None
    for field in ("issue", "pull_request"):
        item = payload.get(field)
        if isinstance(item, dict) and isinstance(item.get("number"), int):
            number = item["number"]
            break
    if number is None and isinstance(payload.get("number"), int):
        number = payload["number"]
    return f"{name}#{number}" if isinstance(name, str) and number is not None else None


class GitHubWebhooks:
    """GitHub's webhook scheme (the module docstring): ``webhook_channel(scheme="github")``.

    Args:
        key: what the runs of a delivery are idempotent on: ``"body"`` (the default), the signed body,
            so a replay under an invented GUID starts nothing; ``"delivery"``, the unsigned GUID.
    """

    name = "github"

    def __init__(self, *, key: Literal["body", "delivery"] = "body") -> None:
        if key not in ("body", "delivery"):
            raise ChamviValidationError(f"GitHubWebhooks(key={key!r}): use 'body' or 'delivery'")
        self.key = key

    def verify(self, request: WebhookRequest) -> WebhookEvent | WebhookAnswer:
        """Checks ``X-Hub-Signature-256`` over the raw body; a ``ping`` starts nothing.

        Raises:
            WebhookSignatureError: no signature, or one that matches no secret (401).
            ChamviValidationError: no ``X-GitHub-Event`` or ``X-GitHub-Delivery``, or a body that is
                not JSON (nor a form with a JSON ``payload``) (422).
        """
        given = request.header(SIGNATURE_HEADER)
        if not given:
            raise WebhookSignatureError(
                f"missing {SIGNATURE_HEADER}: set the webhook's secret on GitHub to channel "
                f"{request.channel!r}'s secret (GitHub signs only when it has one)"
            )
        if not any_matches([given], [github_signature(s, request.body) for s in request.secrets]):
            raise WebhookSignatureError(
                f"the {SIGNATURE_HEADER} does not match the body under channel {request.channel!r}'s secret"
            )
        event = request.header(EVENT_HEADER)
        delivery = request.header(DELIVERY_HEADER)
        if not event or not delivery:
            raise ChamviValidationError(f"a GitHub delivery carries {EVENT_HEADER} and {DELIVERY_HEADER}")
        if event == "ping":
            return WebhookAnswer(delivery=delivery, event=event)
        payload = form_payload(request.body) if request.media_type == FORM else json_body(request.body)
        key = None
        if self.key == "body":
            key = "github-sha256-" + hashlib.sha256(request.body).hexdigest()
        return WebhookEvent(
            delivery=delivery, payload=payload, event=event, address=issue_address(payload), key=key
        )

    def sign(self, secret: str, body: bytes, *, delivery: str, timestamp: int) -> dict[str, str]:
        """The headers GitHub would send with ``body``: a ``chamvi`` event, its GUID, its signature."""
        return {
            SIGNATURE_HEADER: github_signature(secret, body),
            DELIVERY_HEADER: delivery,
            EVENT_HEADER: "chamvi",
        }


class GitHubComments(_http.ApiReply):
    """Replies as comments on the issue or pull request ``owner/repo#number`` (the message's address).

    Give it to ``webhook_channel(..., scheme="github", reply=GitHubComments())``: a run started by
    an issue answers on that issue. The comment ends with the message's effect marker (an HTML
    comment, invisible on GitHub); a retried attempt first looks for it and posts nothing when a
    crashed attempt's comment is there.

    Args:
        token: the token to post with; None reads ``GITHUB_TOKEN`` (through ``settings``).
        api_url: GitHub's REST API; None reads ``GITHUB_API_URL`` (default ``https://api.github.com``).
        settings: where ``token`` and ``api_url`` come from when not given; None reads the
            environment on the first send.
        timeout: how long one API call may take.
    """

    service = "GitHub's REST API"
    token_variable = "GITHUB_TOKEN"

    def configured(self, settings: Settings) -> tuple[str | None, str]:
        """The token and base URL from ``settings`` (``GITHUB_TOKEN``)."""
        return settings.github_token, settings.github_api_url

    def _headers(self, token: str) -> dict[str, str]:
        return {
            "authorization": f"Bearer {token}",
            "accept": "application/vnd.github+json",
            "x-github-api-version": API_VERSION,
            "user-agent": "chamvi-temporal",
        }

    @staticmethod
    def _issue(address: str, channel: str) -> tuple[str, str, str]:
        match = _ADDRESS.match(address)
        if match is None:
            raise ChannelDeliveryError(
                f"channel {channel!r}: address {address!r} is no GitHub issue or pull request: write "
                "owner/repo#number"
            )
        return match["owner"], match["repo"], match["number"]

    async def send(self, message: ChannelMessage, *, channel: str) -> None:
        """Posts the message as a comment, unless a retried attempt finds it posted already.

        Raises:
            ChannelUnavailableError: 408, 429, 5xx, a rate limit or no answer: Temporal tries again.
            ChannelDeliveryError: no token, an address that is no issue, another refusal: a tool error.
        """
        token, api_url = self.config(channel)
        owner, repo, number = self._issue(message.address, channel)
        retried = activity.in_activity() and activity.info().attempt > 1
        if retried and await self.find(message.address, message.key, channel=channel) is not None:
            return
        text = "\n\n".join([*([f"**{message.title}**"] if message.title else []), message.body])
        await _http.send(
            "POST",
            f"{api_url}/repos/{owner}/{repo}/issues/{number}/comments",
            what=f"channel {channel!r}: GitHub's comments on {message.address}",
            timeout=self.timeout,
            headers=self._headers(token),
            json={"body": f"{text}\n\n{effect_marker(message.key)}"},
            temporary=_rate_limited,
        )

    async def find(self, address: str, key: str, *, channel: str = "github") -> dict[str, Any] | None:
        """The comment on ``address`` that carries ``key``'s effect marker, or None.

        It reads the first pages of comments and the last (a crashed attempt's comment is among the
        newest), so it can serve as an effect tool's ``already_applied`` too.

        Raises:
            ChannelUnavailableError: GitHub could not answer now.
            ChannelDeliveryError: GitHub refused to list the comments.
        """
        token, api_url = self.config(channel)
        owner, repo, number = self._issue(address, channel)
        marker = effect_marker(key)
        url = f"{api_url}/repos/{owner}/{repo}/issues/{number}/comments"
        pages: list[str | None] = [None]
        seen: set[str] = set()
        while pages and len(seen) < _SEARCHED_PAGES:
            page = pages.pop(0)
            if page in seen:
                continue
            response = await _http.send(
                "GET",
                page or url,
                what=f"channel {channel!r}: GitHub's comments on {address}",
                timeout=self.timeout,
                headers=self._headers(token),
                params=None if page else {"per_page": "100"},
                temporary=_rate_limited,
            )
            seen.add(page or url)
            for comment in response.json():
                if isinstance(comment, dict) and marker in str(comment.get("body") or ""):
                    return comment
            links = response.links
            pages.extend(link["url"] for rel in ("next", "last") if (link := links.get(rel)))
        return None


def _rate_limited(response: Any) -> bool:
    """GitHub answers a rate limit with 403 and no requests left, or a ``Retry-After``."""
    headers = response.headers
    return bool(
        response.status_code == 403
        and (headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers)
    )
