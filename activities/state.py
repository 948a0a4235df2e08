"""Reading agent state for ``chamvi state list``, on the worker that holds Qdrant."""

from __future__ import annotations

from temporalio import activity

from chamvi._constants import ACTIVITY_STATE_LIST
from chamvi.models import StateListing, StateListRequest
from chamvi.state.views import StateViews


class StateActivities:
    """Holds the views over the app's agents and the worker's state store."""

    def __init__(self, views: StateViews) -> None:
        self.views = views

    @activity.defn(name=ACTIVITY_STATE_LIST)
    async def state_list(self, request: StateListRequest) -> StateListing:
        """A page of an agent's state (see ``StateViews.listing``)."""
        return await self.views.listing(request)
