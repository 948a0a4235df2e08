"""The workflow sandbox without its per-payload entries when no payload codec or external storage is set.

For each payload of an activation and of a completion, temporalio asks the workflow instance for the
payload's serialization context and external-store context (three visits of an activation, four of a
completion), and a sandboxed instance answers each question by running code inside the sandbox: an
``exec`` under the importer's patches, 60 to 90 µs each on 2 cores. An agent step's activations and
completions carry about 25 payloads, so that was about 1.7 ms of a step's 11 ms of CPU in
``bench/runs.py``'s throughput section. The answers are only ever handed to the payload codec and to
external storage: the payload converter runs inside the workflow and builds its own context. With
neither configured, no answer changes a byte, and this runner answers at once outside the sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass

from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.converter import DataConverter, SerializationContext, StorageDriverStoreContext
from temporalio.worker import WorkflowInstance, WorkflowInstanceDetails, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner
from temporalio.workflow import Info


def needs_payload_contexts(converter: DataConverter) -> bool:
    """Whether a payload's contexts reach anything: a codec or external storage that could read them."""
    return converter.payload_codec is not None or converter.external_storage is not None


def without_payload_contexts(runner: WorkflowRunner, converter: DataConverter) -> WorkflowRunner:
    """``runner``, answering the payload contexts outside its sandbox when ``converter`` never reads them.

    Only temporalio's own sandboxed runner is replaced (its restrictions kept); a runner of the
    user's, and any runner of a worker whose converter has a codec or external storage, stay.
    """
    if type(runner) is not SandboxedWorkflowRunner or needs_payload_contexts(converter):
        return runner
    return ContextFreeSandboxedRunner(restrictions=runner.restrictions, runner_class=runner.runner_class)


@dataclass(frozen=True)
class ContextFreeSandboxedRunner(SandboxedWorkflowRunner):
    """The sandboxed runner, its instances answering the payload contexts without entering the sandbox.

    A subclass, so that what temporalio does to a sandboxed runner (its debug mode's passthrough) still
    applies.
    """

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        return _ContextFreeInstance(super().create_instance(det))


class _ContextFreeInstance(WorkflowInstance):
    """A sandboxed instance whose payloads get no serialization context and no store target.

    Without a codec or external storage, temporalio's converter then passes each payload on as it
    is, exactly as it does with the contexts the sandbox would have answered.
    """

    def __init__(self, sandboxed: WorkflowInstance) -> None:
        self._sandboxed = sandboxed

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        return self._sandboxed.activate(act)

    # ``command_info`` is typed ``object``: temporalio's own annotation is a class of a private module
    # (``temporalio.worker._command_aware_visitor``), and neither method reads it
    def get_serialization_context(self, command_info: object) -> SerializationContext | None:
        return None

    def get_external_store_context(self, command_info: object) -> StorageDriverStoreContext:
        return StorageDriverStoreContext(target=None)

    def get_info(self) -> Info:
        return self._sandboxed.get_info()

    def get_thread_id(self) -> int | None:
        return self._sandboxed.get_thread_id()
