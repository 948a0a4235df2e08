"""Outbound HTTP shared by the replies: one request, its failure sorted into retry-later or refused."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

import httpx

from chamvi.errors import ChannelDeliveryError, ChannelUnavailableError
from chamvi.settings import Settings


def retry_after(response: httpx.Response) -> float | None:
    """The seconds a ``Retry-After`` header asks for, when it is a number of seconds."""
    value = response.headers.get("retry-after", "")
    return float(value) if value.isdigit() else None


def is_temporary(status: int) -> bool:
    """408, 429 and 5xx: the receiver may take the same request later."""
    return status in (408, 429) or status >= 500


async def send(
    method: str,
    url: str,
    *,
    what: str,
    timeout: timedelta,
    headers: Mapping[str, str],
    json: Any = None,
    content: bytes | None = None,
    params: Mapping[str, str] | None = None,
    temporary: Callable[[httpx.Response], bool] = lambda response: False,
) -> httpx.Response:
    """Sends one request and answers a 2xx response.

    Args:
        method: the HTTP method.
        url: where to.
        what: names the channel and the call in errors (``"github channel 'gh': POST .../comments"``).
        timeout: how long it may take.
        headers: its headers.
        json: a JSON body.
        content: a raw body.
        params: query parameters.
        temporary: whether another refusal is temporary too (GitHub's rate limit answers 403).

    Raises:
        ChannelUnavailableError: 408, 429, 5xx or no answer: Temporal tries again.
        ChannelDeliveryError: another non-2xx answer: a tool error.
    """
    try:
        async with httpx.AsyncClient(timeout=timeout.total_seconds()) as http:
            response = await http.request(
                method, url, headers=dict(headers), json=json, content=content, params=params
            )
    except httpx.HTTPError as error:
        raise ChannelUnavailableError(f"{what}: no answer: {type(error).__name__}: {error}") from None
    if response.status_code < 300:
        return response
    detail = f"{what} answered {response.status_code}: {response.text[:200]}"
    if is_temporary(response.status_code) or temporary(response):
        raise ChannelUnavailableError(detail, retry_after=retry_after(response))
    raise ChannelDeliveryError(detail)


class ApiReply:
    """A reply through a web API with a token: the token and base URL given, else from the settings.

    Args:
        token: the token to send with; None reads the settings' (the environment's).
        api_url: the API's base URL; None reads the settings'.
        settings: where ``token`` and ``api_url`` come from when not given; None reads the
            environment on the first send.
        timeout: how long one API call may take.
    """

    service = "the API"
    token_variable = "TOKEN"

    def __init__(
        self,
        *,
        token: str | None = None,
        api_url: str | None = None,
        settings: Settings | None = None,
        timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        self._token = token
        self._api_url = api_url.rstrip("/") if api_url else None
        self._settings = settings
        self.timeout = timeout

    def configured(self, settings: Settings) -> tuple[str | None, str]:
        """The token and base URL ``settings`` hold for this API."""
        raise NotImplementedError

    def config(self, channel: str) -> tuple[str, str]:
        """The token and base URL to send with.

        Raises:
            ChannelDeliveryError: no token, given or in the environment (a tool error that says which
                variable to set).
        """
        token, api_url = self._token, self._api_url
        if token is None or api_url is None:
            self._settings = self._settings or Settings.from_env()
            from_settings = self.configured(self._settings)
            token, api_url = token or from_settings[0], api_url or from_settings[1]
        if not token:
            raise ChannelDeliveryError(
                f"channel {channel!r} has no token for {self.service}: set {self.token_variable} or give "
                f"{type(self).__name__}(token=...)"
            )
        return token, api_url.rstrip("/")
