"""Searching collections from outside a worker, through each collection workflow's ``search`` update.

``chamvi knowledge search`` and ``chamvi mcp`` search this way: the worker that serves a collection
runs the search as an activity beside the Qdrant it holds, so the caller needs a Temporal client
only. It works beside a running worker in Qdrant's local mode, which allows one process per folder,
and leaves no workflow of its own in the Temporal UI's list.

An update searches its own collection only, so a search over several asks each one, at once, and
ranks the matches by score across them, as one search in a worker does (each score is a cosine
similarity): at most ``top_k`` in all, at most ``MAX_CHARS`` characters.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.exceptions import ActivityError
from temporalio.service import RPCError, RPCStatusCode

from chamvi import _constants as c
from chamvi.errors import ERROR_CLASSES, ChamviError, KnowledgeNotReadyError, UnavailableError
from chamvi.knowledge.search import MAX_CHARS, Match, SearchResult
from chamvi.models.knowledge import SearchRequest


@dataclass(frozen=True)
class CollectionSearch:
    """Searches collections through the workflows of the workers that serve them.

    Attributes:
        client: a Temporal client with chamvi's data converter.
        task_queue: where the workers poll, for messages.
        timeout: seconds to wait for a worker to answer one search.
    """

    client: Client
    task_queue: str = c.TASK_QUEUE
    timeout: float = 60.0

    async def search(
        self, collections: Sequence[str], query: str, *, top_k: int = 5, min_score: float | None = None
    ) -> SearchResult:
        """The ``top_k`` passages across ``collections`` nearest in meaning to ``query``, best first.

        Raises:
            KnowledgeNotReadyError: a collection does not run (no worker started it).
            UnavailableError: no worker answered within ``timeout``.
            ChamviError: the worker refused the search (its message says why: an empty query, a
                collection not ready yet or orphaned).
        """
        answers = await asyncio.gather(
            *(self._one(name, query, top_k=top_k, min_score=min_score) for name in collections)
        )
        found = sorted(
            (Match.model_validate(match) for answer in answers for match in answer.get("matches") or []),
            key=lambda match: match.score,
            reverse=True,
        )
        result = SearchResult(truncated=any(answer.get("truncated") for answer in answers))
        chars = 0
        for match in found[:top_k]:
            if chars + len(match.text) > MAX_CHARS:
                result.truncated = True
                break
            chars += len(match.text)
            result.matches.append(match)
        return result

    async def _one(self, name: str, query: str, *, top_k: int, min_score: float | None) -> dict[str, Any]:
        handle = self.client.get_workflow_handle(c.KNOWLEDGE_ID_PREFIX + name)
        request = SearchRequest(collections=[name], query=query, top_k=top_k, min_score=min_score)
        try:
            answer: dict[str, Any] = await asyncio.wait_for(
                handle.execute_update(c.UPDATE_KNOWLEDGE_SEARCH, request, result_type=dict), self.timeout
            )
        except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):  # how the SDK names a cancelled wait
            raise UnavailableError(
                f"no worker answered the search within {self.timeout:g} s on task queue "
                f"{self.task_queue!r}: start one with `chamvi dev` or `chamvi worker`"
            ) from None
        except WorkflowUpdateFailedError as error:
            raise _refusal(error) from None
        except RPCError as error:
            if error.status != RPCStatusCode.NOT_FOUND:
                raise
            raise KnowledgeNotReadyError(
                f'Knowledge collection "{name}" does not run on this Temporal namespace: a worker whose app '
                "declares it (or holds it as a managed collection) starts it"
            ) from None
        return answer


def root_cause(error: WorkflowUpdateFailedError) -> BaseException:
    """What the worker raised, under the update's and the activity's failures."""
    cause: BaseException = error
    while isinstance(cause, WorkflowUpdateFailedError | ActivityError) and cause.cause:
        cause = cause.cause
    return cause


def _refusal(error: WorkflowUpdateFailedError) -> ChamviError:
    """The worker's own message, as the error of the code it carries."""
    cause = root_cause(error)
    message = str(getattr(cause, "message", None) or cause)
    kind = getattr(cause, "type", None)
    return next((cls for cls in ERROR_CLASSES if cls.code == kind), ChamviError)(message)
