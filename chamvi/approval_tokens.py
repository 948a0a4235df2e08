"""Approval tokens: one approval answered by whoever holds its token, once, knowing nothing else.

A channel's approval request (``handle.approve(...)``, and the run's automatic notice to its source
channel) carries a token, and a link to the approvals page with it when ``CHAMVI_PUBLIC_URL`` is
set. The token answers that one approval without the run or approval id:
``client.approvals.resume(token, decision)`` (``chamvi.client``), ``POST /approvals/answer``,
``chamvi approve --token``, or the page the link opens.

**A capability.** Possession answers: the token is the permission, as a link in a chat message is
meant to be. Whoever answers with it is recorded as the approver: the API's caller when it also
sent a bearer token, the CLI's user, the ``approver`` a program passes, else :data:`TOKEN_HOLDER`.
So no token goes out through a channel marked ``untrusted``: whoever can post there, maybe the
author of what made the run ask, could answer with it.

**Signed, not stored.** A token is an HMAC-SHA256, under a server secret, of the run id, the
approval id, its expiry and whether the request's own text went out with it. Nothing new is stored:
no table, and nothing in workflow state or history, where a random token kept for lookup would be
readable by everyone who can read the run in the Temporal UI (and would have to be made with
``workflow.random()`` to replay). The secret is ``CHAMVI_APPROVAL_SECRET``, or a file the first
worker or API generates in the data folder (as ``chamvi dev`` keeps its API token): every worker that
sends approval requests and every API or CLI that takes the answers must share it.

**Single use** follows from the workflow: the token names one approval id, the ``answer_approval``
update's validator refuses a second answer to it (the wait has its answer, or has ended), and a
later approval of the same call has another id. So a used token, or one whose approval was
answered otherwise, timed out or whose run ended, is refused with ``approval_not_pending``; a token
chamvi did not sign with ``approval_token_invalid``; a genuine one past its expiry (the approval's
deadline when it was sent) with ``approval_token_expired``. None of these errors says anything else
about the run.

The format is ``ca1.<payload>.<signature>`` in base64url; the payload is readable (ids and expiry),
but callers treat the token as opaque.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import json
import os
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from chamvi.errors import (
    ApprovalTokenExpiredError,
    ApprovalTokenInvalidError,
    ChamviValidationError,
)
from chamvi.models import Invoker

if TYPE_CHECKING:
    from chamvi.settings import Settings

SECRET_FILE = "approval-secret"
"""The generated secret's file in the data folder, when ``CHAMVI_APPROVAL_SECRET`` is unset."""
MIN_SECRET_CHARS = 32
TOKEN_MAX_CHARS = 4096
"""Longer is no token chamvi issued (run ids are at most ~1000 characters)."""
LINK_FRAGMENT = "answer="
"""The approvals page reads the token from ``#answer=<token>``: a fragment never reaches the server,
so the link's token is in no access log, proxy log or ``Referer``."""

_PREFIX = "ca1"
_LABEL = b"chamvi approval token v1\n"
NOT_PENDING = "this approval is not pending any more: it was answered already, timed out, or its run ended"

TOKEN_HOLDER = Invoker(id="token holder", kind="approval_token")
"""The approver recorded for an answer by token from a caller who said nothing else about itself."""


@dataclass(frozen=True)
class ApprovalClaims:
    """What a genuine token says: which approval it answers, until when, and what was sent with it.

    Attributes:
        run_id: the run that waits.
        approval_id: the approval it waits on (``<step>:<tool call id>:<n>``).
        expires: the approval's deadline when the request was sent.
        detail: whether the request's title and body went out with the token (a tool's
            ``handle.approve``); False for the run's automatic notice, which carries only a generic
            review request, so the token shows no more than that either.
    """

    run_id: str
    approval_id: str
    expires: datetime
    detail: bool


class PendingApproval(BaseModel):
    """What a token's holder is shown before answering (``POST /approvals/view``).

    The request's title and body only when they went out with the token; never the call's arguments,
    which stay in the run's view for those who may read runs.
    """

    run_id: str
    approval_id: str
    agent: str
    tool: str
    until: datetime
    title: str | None = None
    body: str | None = None


@dataclass(frozen=True)
class ResumedApproval:
    """What an answer by token was recorded for."""

    run_id: str
    approval_id: str
    approved: bool


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ApprovalTokens:
    """Issues and checks approval tokens under one secret; builds the links to the approvals page.

    Args:
        secret: the signing key (``CHAMVI_APPROVAL_SECRET``); at least 32 characters.
        public_url: where people reach the HTTP API (``CHAMVI_PUBLIC_URL``, base path included);
            without it, requests carry the token but no link.

    Raises:
        ChamviValidationError: a secret shorter than 32 characters.
    """

    def __init__(self, secret: bytes | str, *, public_url: str | None = None) -> None:
        key = secret.encode() if isinstance(secret, str) else secret
        if len(key) < MIN_SECRET_CHARS:
            raise ChamviValidationError(
                f"the approval secret has {len(key)} characters: use at least {MIN_SECRET_CHARS}, e.g. "
                "CHAMVI_APPROVAL_SECRET=$(python -c 'import secrets; print(secrets.token_hex(32))')"
            )
        self._key = key
        self.public_url = public_url.rstrip("/") if public_url else None

    def __repr__(self) -> str:
        return f"ApprovalTokens(public_url={self.public_url!r})"

    def _signature(self, payload: str) -> bytes:
        return hmac.new(self._key, _LABEL + payload.encode("ascii"), hashlib.sha256).digest()

    def issue(self, run_id: str, approval_id: str, *, expires: datetime, detail: bool) -> str:
        """The token that answers ``approval_id`` of ``run_id`` until ``expires``."""
        claims = [run_id, approval_id, int(expires.timestamp()), 1 if detail else 0]
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        return f"{_PREFIX}.{payload}.{_b64(self._signature(payload))}"

    def verify(self, token: str, *, now: datetime | None = None) -> ApprovalClaims:
        """What ``token`` says, once its signature and expiry are checked.

        Raises:
            ApprovalTokenInvalidError: not a token signed with this secret.
            ApprovalTokenExpiredError: a genuine token past its expiry.
        """
        claims = self._claims(token.strip())
        if claims is None:
            raise ApprovalTokenInvalidError(
                "this approval token is not valid: it was altered or cut short, or signed with another "
                "secret (every worker, API and CLI must share CHAMVI_APPROVAL_SECRET)"
            )
        if (now or datetime.now(UTC)) >= claims.expires:
            raise ApprovalTokenExpiredError(
                f"this approval token expired at {claims.expires:%Y-%m-%d %H:%M} UTC, when the approval "
                "it answers timed out"
            )
        return claims

    def _claims(self, token: str) -> ApprovalClaims | None:
        if len(token) > TOKEN_MAX_CHARS or not token.isascii():
            return None
        prefix, _, rest = token.partition(".")
        payload, _, signature = rest.partition(".")
        if prefix != _PREFIX or not payload or not signature:
            return None
        try:
            presented = _unb64(signature)
        except (binascii.Error, ValueError):
            return None
        if not hmac.compare_digest(presented, self._signature(payload)):
            return None
        try:
            run_id, approval_id, expires, detail = json.loads(_unb64(payload))
            return ApprovalClaims(
                run_id=str(run_id),
                approval_id=str(approval_id),
                expires=datetime.fromtimestamp(int(expires), UTC),
                detail=bool(detail),
            )
        except (binascii.Error, ValueError, TypeError, OverflowError, OSError):
            return None  # signed by chamvi, so only a chamvi of another format writes such

    def link(self, token: str) -> str | None:
        """The approvals page's address that opens ``token``'s approval; None without a public URL."""
        if self.public_url is None:
            return None
        return f"{self.public_url}/ui/#{LINK_FRAGMENT}{token}"


def approval_secret(settings: Settings, *, create: bool) -> str | None:
    """``CHAMVI_APPROVAL_SECRET``, else the data folder's ``approval-secret``.

    ``create``: a worker or an API makes the file when there is none, so that on one machine they
    share it; a CLI only reads it (a secret it made would check nothing), and answers None.
    """
    if settings.approval_secret:
        return settings.approval_secret
    path = settings.data / SECRET_FILE
    value = _read(path)
    if value or not create:
        return value
    return _create(path)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None


def _create(path: Path) -> str:
    """Writes a new secret unless another process got there first; answers the one in the file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(secrets.token_hex(32) + "\n")
    try:
        # a link is atomic and refuses an existing name: two processes starting at once keep one secret
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        draft.unlink()
    value = _read(path)
    assert value is not None
    return value


def approval_tokens(settings: Settings, *, create: bool = True) -> ApprovalTokens | None:
    """The settings' :class:`ApprovalTokens` (see :func:`approval_secret`); None without a secret.

    Raises:
        ChamviValidationError: ``CHAMVI_APPROVAL_SECRET`` is shorter than 32 characters.
    """
    secret = approval_secret(settings, create=create)
    return ApprovalTokens(secret, public_url=settings.public_url) if secret else None

