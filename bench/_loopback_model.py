"""The model both sides of ``agent_peers.py`` call: an OpenAI-compatible chat completions server on
loopback, run as its own process (``python -m bench._loopback_model STEPS`` from the repository's root).

It answers at once and from the request alone, so 30 runs of either side can call it in any order:
a conversation with fewer than ``STEPS`` tool results gets a call of ``fetch_page`` for the next page,
one with ``STEPS`` gets the final answer. It prints its base URL (up to ``/v1``) on one line, then
serves until its stdin closes. A process of its own keeps its CPU out of both sides' figures.
"""

from __future__ import annotations

import sys

from tests.support.openai_server import COMPLETIONS_PATH, Answer, Recorded, text, tool_call
from tests.support.scripted_server import ScriptedServer


def script(steps: int) -> ScriptedServer[Recorded]:
    def answer(request: Recorded) -> Answer:
        done = sum(1 for message in request.messages if message.get("role") == "tool")
        if done < steps:
            return tool_call("fetch_page", {"page": done}, call_id=f"call_{done}")
        return text(f"read {steps} pages")

    return ScriptedServer(COMPLETIONS_PATH, Recorded, fallback=answer)


def main() -> None:
    with script(int(sys.argv[1])) as server:
        print(f"{server.url}/v1", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
