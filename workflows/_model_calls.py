"""An ``AgentRun``'s ``chamvi.call_model`` activity calls, one a step, and its final answer.

Each call sends the transcript's new messages only (the activity keeps the rest by digest), and
records the step the run's page and ``chamvi runs show`` list (``llm``), with its usage.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

from ._calls import RunFailed, call_activity
from ._run_record import RunRecord

with workflow.unsafe.imports_passed_through():
    from chamvi import _constants as c
    from chamvi._transcript import chain_digest
    from chamvi.errors import ChamviValidationError
    from chamvi.models import AgentSpec, ModelRequest, ModelResponse, StepView


class ModelCalls(RunRecord):
    """The ``chamvi.call_model`` step of an ``AgentRun``, and the output its final answer sets."""

    def _finish(self, spec: AgentSpec, response: ModelResponse) -> None:
        if not spec.structured_output:
            self._output = response.message.content or ""
            return
        if response.output_error is not None:
            raise RunFailed.of(
                ChamviValidationError(
                    f"the final answer does not match the output schema: {response.output_error[:500]}",
                    issues=response.output_issues or (),
                )
            )
        self._output = response.output

    async def _call_model(self, spec: AgentSpec, step: int) -> ModelResponse:
        delta = self._messages[self._sent_count :]
        started = workflow.now()
        response = await call_activity(
            c.ACTIVITY_CALL_MODEL,
            ModelRequest(
                run_id=workflow.info().workflow_id,
                agent=spec.name,
                step=step,
                trigger=self._trigger_without_payload(),
                base_count=self._sent_count,
                base_digest=self._sent_digest,
                delta=delta,
                skills_version=spec.skills_version,
                conversation=self._require_input().conversation,
                revision=spec.revision,
                model_settings=self._require_input().model_settings,
            ),
            ModelResponse,
            start_to_close=timedelta(seconds=spec.model_timeout_seconds),
            retry_policy=self._retry_policy(spec, None),
            summary=f"step {step}: {spec.model}",
        )
        self._sent_digest = chain_digest(self._sent_digest, delta)
        self._sent_count = len(self._messages)
        self._usage = self._usage + response.usage
        self._steps.append(
            StepView(
                index=step,
                kind="llm",
                started_at=started,
                ended_at=workflow.now(),
                text=response.message.content,
                tool_calls=response.message.tool_calls,
                usage=response.usage,
                model=spec.model,
                model_settings=response.model_settings,
            )
        )
        self._show_details()
        return response
