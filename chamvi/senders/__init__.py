"""Webhook senders: one verifier per signing scheme, and replies where an event came from.

``webhook_channel(name, scheme=..., secret=...)`` takes a scheme by name (``"chamvi"``, the default,
``"standard-webhooks"``, ``"github"``, ``"slack"``, ``"stripe"``) or any object that speaks
:class:`WebhookScheme`; ``reply=GitHubComments()`` / ``reply=SlackMessages()`` answers on the issue or
in the thread the event came from.
"""

from __future__ import annotations

from chamvi.errors import InvalidAgentDefinitionError
from chamvi.senders._base import (
    SigningScheme,
    WebhookAnswer,
    WebhookEvent,
    WebhookRequest,
    WebhookScheme,
)
from chamvi.senders.github import GitHubComments, GitHubWebhooks
from chamvi.senders.own import ChamviSignature
from chamvi.senders.slack import SlackEvents, SlackMessages
from chamvi.senders.standard import StandardWebhooks
from chamvi.senders.stripe import StripeWebhooks

SCHEMES: dict[str, type[WebhookScheme]] = {
    "chamvi": ChamviSignature,
    "standard-webhooks": StandardWebhooks,
    "github": GitHubWebhooks,
    "slack": SlackEvents,
    "stripe": StripeWebhooks,
}
"""The built-in schemes by name, with their defaults."""


def scheme_named(scheme: str | WebhookScheme, channel: str) -> WebhookScheme:
    """The scheme ``webhook_channel(scheme=...)`` names.

    Raises:
        InvalidAgentDefinitionError: an unknown name, or an object that does not speak WebhookScheme.
    """
    if isinstance(scheme, str):
        found = SCHEMES.get(scheme)
        if found is None:
            known = ", ".join(repr(n) for n in SCHEMES)
            raise InvalidAgentDefinitionError(
                f"webhook channel {channel!r}: unknown scheme {scheme!r}: the built-in schemes are {known}, "
                "or pass an object with name and verify(request) (chamvi.WebhookScheme)"
            )
        return found()
    if not isinstance(scheme, WebhookScheme):
        raise InvalidAgentDefinitionError(
            f"webhook channel {channel!r}: scheme {scheme!r} has no name and verify(request): see "
            "chamvi.WebhookScheme"
        )
    return scheme


__all__ = [
    "SCHEMES",
    "ChamviSignature",
    "GitHubComments",
    "GitHubWebhooks",
    "SigningScheme",
    "SlackEvents",
    "SlackMessages",
    "StandardWebhooks",
    "StripeWebhooks",
    "WebhookAnswer",
    "WebhookEvent",
    "WebhookRequest",
    "WebhookScheme",
    "scheme_named",
]
