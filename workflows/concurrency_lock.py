"""One run at a time per concurrency key, across every worker, in arrival order.

A small workflow per key (``chamvi-lock:<key>``) keeps a FIFO queue of run ids. Runs join it by
signal-with-start and are granted the key by a signal; a run releases the key when it ends, however
it ends. A holder that vanished without releasing (terminated, reset) is noticed by a periodic
check, so a key is never held forever.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi.models import LockRequest, LockState, RunIsOpenRequest

HOLDER_CHECK_INTERVAL = timedelta(seconds=60)
GRANTS_BEFORE_CONTINUE_AS_NEW = 500


@workflow.defn(name=c.CONCURRENCY_LOCK_WORKFLOW)
class ConcurrencyLockWorkflow:
    """The lock of one concurrency key: a FIFO queue of runs, granted one at a time."""

    def __init__(self) -> None:
        self._queue: list[str] = []
        self._holder: str | None = None
        self._released: set[str] = set()

    @workflow.signal(name=c.SIGNAL_LOCK_ACQUIRE)
    def acquire(self, run_id: str) -> None:
        """Queues a run for the key; a redelivered signal of a queued, holding or released run is ignored."""
        if run_id != self._holder and run_id not in self._queue and run_id not in self._released:
            self._queue.append(run_id)

    @workflow.signal(name=c.SIGNAL_LOCK_RELEASE)
    def release(self, request: LockRequest) -> None:
        """The run ended (however it ended): the key goes to the next run, or a queued one leaves."""
        self._released.add(request.run_id)
        if request.run_id in self._queue:
            self._queue.remove(request.run_id)

    @workflow.query(name="state")
    def state(self) -> LockState:
        """The key, its holder and its queue, for people looking at a stuck key."""
        return LockState(
            key=workflow.info().workflow_id.removeprefix(c.LOCK_ID_PREFIX),
            queue=self._queue,
            holder=self._holder,
        )

    @workflow.run
    async def run(self, state: LockState) -> None:
        """Grants the key in arrival order, checks that a holder lives, continues as new now and then."""
        for run_id in state.queue:
            self.acquire(run_id)
        if state.holder is not None:
            self._holder = state.holder
            await self._hold(state.holder)
        grants = 0
        while True:
            await workflow.wait_condition(lambda: bool(self._queue) or workflow.all_handlers_finished())
            if not self._queue:
                return  # idle: a later acquire starts the lock again
            if grants >= GRANTS_BEFORE_CONTINUE_AS_NEW:
                workflow.continue_as_new(LockState(key=state.key, queue=self._queue))
            run_id = self._queue.pop(0)
            if await self._grant(run_id):
                grants += 1
                await self._hold(run_id)

    async def _grant(self, run_id: str) -> bool:
        try:
            await workflow.get_external_workflow_handle(run_id).signal(c.SIGNAL_LOCK_GRANTED)
        except Exception as error:  # the run is gone (ended before its turn): skip it
            workflow.logger.info("concurrency key skips %r: %s", run_id, error)
            return False
        self._holder = run_id
        return True

    async def _hold(self, run_id: str) -> None:
        while run_id not in self._released:
            try:
                await workflow.wait_condition(lambda: run_id in self._released, timeout=HOLDER_CHECK_INTERVAL)
            except TimeoutError:
                if not await workflow.execute_activity(
                    c.ACTIVITY_RUN_IS_OPEN,
                    RunIsOpenRequest(run_id=run_id),
                    result_type=bool,
                    start_to_close_timeout=timedelta(seconds=30),
                    retry_policy=RetryPolicy(maximum_interval=timedelta(seconds=30)),
                ):
                    break
        self._released.discard(run_id)
        self._holder = None
