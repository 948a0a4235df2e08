"""An app with one agent that writes through ``openai/test-model``, for ``chamvi dev --app`` in tests.

The model is the default ``openai/...`` provider, so ``OPENAI_BASE_URL`` points it at a loopback
OpenAI-compatible server the test scripts.
"""

from chamvi import App, define_agent

app = App(agents=[define_agent(name="writer", model="openai/test-model", instructions="Write.")])
