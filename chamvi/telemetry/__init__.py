"""chamvi's OpenTelemetry: instrumentation and export, its spans, and the GenAI message form.

``_otel``: the worker's instrumentation, metrics and OTLP export; ``_spans``: the spans chamvi
starts; ``_workflow_spans``: the workflow side of a run's ``invoke_agent`` span;
``_genai_messages``: captured content in the GenAI conventions' form. Empty on purpose: a workflow
module or the knowledge search imports one span helper without loading the SDK, the exporters and
the App that ``_otel`` needs.
"""
