"""What a tool factory builds a run's tools from: ``define_agent(tools=lambda ctx: [...])``.

The seed's tool context, handed to the factory outside any tool call: the run (``ctx.run``: its id,
agent and trigger without the payload, as a tool policy sees it), the agent's state
(``ctx.state``), the run's files (``ctx.artifacts``, read only), its channels (``ctx.channels``,
found but never sent through) and what the App provides (``inject(ctx, key)``). A send or a new file
belongs to a tool call, where it is recorded in the run: from the factory, ``emit``, a channel's
``approve`` and ``artifacts.put`` raise :class:`~chamvi.errors.InvalidRunStateError`.

A worker calls the factory once per run (and again on another worker that serves a later step of
the run), so what it builds must depend on the run alone, not on when it is called.
"""

from __future__ import annotations

import sys
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chamvi.artifacts import RunArtifacts
from chamvi.channels import ChannelAccess
from chamvi.context import Provided
from chamvi.errors import InvalidRunStateError
from chamvi.models import Artifact
from chamvi.permissions import PolicyRun
from chamvi.tools import require_state

if TYPE_CHECKING:
    from chamvi.state.access import AgentStateAccess


@dataclass
class FactoryArtifacts(RunArtifacts):
    """``ctx.artifacts`` in a tool factory: the run's files as stored, read only."""

    base: int = sys.maxsize

    def put(
        self, media_type: str, data: bytes | str, filename: str | None = None
    ) -> Coroutine[Any, Any, Artifact]:
        """Refused: a file is put by a tool call, which numbers it in the run.

        Raises:
            InvalidRunStateError: always, at the call itself (a factory is a plain function).
        """
        raise InvalidRunStateError(
            "ctx.artifacts.put() was called from the tools factory: put files inside a tool call "
            "(an effect_tool stores one exactly once)"
        )


@dataclass(frozen=True)
class ToolFactoryContext:
    """A tool factory's argument: ``run``, ``state``, ``artifacts``, ``channels`` and the provided values.

    Attributes:
        run: the run, as a tool policy sees it (``run.trigger.invoker``: who started it).
        channels: ``find_one`` / ``find_one_or_fail`` / ``find``; their handles do not send from here.
        artifacts: the run's files (``get``, ``list``).
        provided: what the App (and the worker) provide, read with ``inject(ctx, key)``.
        state_access: the agent's state, read as :attr:`state`.
    """

    run: PolicyRun
    channels: ChannelAccess
    artifacts: FactoryArtifacts
    provided: Provided
    state_access: AgentStateAccess | None = None

    @property
    def state(self) -> AgentStateAccess:
        """The agent's state (see ``ToolContext.state``).

        Raises:
            InvalidInputError: no worker's state store serves this context.
        """
        return require_state(self.state_access)
