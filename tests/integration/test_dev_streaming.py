"""``chamvi dev`` as a real process: ``chamvi dispatch --follow`` in another process prints the model's
text while the model is still writing, through the dev API's event stream."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

from tests.integration.test_cli import ROOT, free_port, group_gone, start_dev
from tests.support.openai_server import OpenAIServer, stream

PATIENCE_SECONDS = 60.0


class Output:
    """A process's stdout as it arrives, read by a thread of its own."""

    def __init__(self, pipe: IO[bytes] | None) -> None:
        assert pipe is not None
        self._pipe = pipe
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while chunk := os.read(self._pipe.fileno(), 4096):
            self._chunks.append(chunk)

    @property
    def text(self) -> str:
        return b"".join(self._chunks).decode()

    def wait_for(self, wanted: str) -> None:
        deadline = time.monotonic() + PATIENCE_SECONDS
        while wanted not in self.text:
            assert time.monotonic() < deadline, f"{wanted!r} never came; got {self.text!r}"
            time.sleep(0.05)

    def close(self) -> str:
        self._thread.join(timeout=PATIENCE_SECONDS)
        return self.text


def test_dispatch_follow_prints_the_text_the_model_is_still_writing_through_the_chamvi_dev_api(
    tmp_path: Path,
) -> None:
    """The ports are given to `chamvi dev` once: `dispatch --follow` finds them in DATA/dev-stack.json;
    the API's access log goes to DATA/api-access.log, not to the terminal."""
    port, ui_port, api_port = free_port(), free_port(), free_port()
    data = tmp_path / "data"
    paused = threading.Event()
    with OpenAIServer() as model_server:
        model_server.add(stream("Hel", paused, "lo from dev."))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "CHAMVI_", "OPENAI_"))}
        env |= {"CHAMVI_DATA": str(data)}
        env["OPENAI_BASE_URL"] = model_server.url + "/v1"
        log = tmp_path / "dev.out"
        command = ["dev", "--app", "tests.support.streaming_app:app", "--port", str(port)]
        command += ["--ui-port", str(ui_port), "--api-port", str(api_port)]
        dev = start_dev(command, env, log)
        try:
            deadline = time.monotonic() + PATIENCE_SECONDS
            while "Ctrl-C to stop" not in log.read_text():
                assert dev.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            argv = ["dispatch", "writer", "--follow"]
            follow = subprocess.Popen(
                [sys.executable, "-m", "chamvi.cli", *argv],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            output, errors = Output(follow.stdout), Output(follow.stderr)
            try:
                # the model server holds the rest of its answer until the first piece is on the screen
                output.wait_for("Hel")
                paused.set()
                assert follow.wait(timeout=PATIENCE_SECONDS) == 0
                lines = output.close().splitlines()
                assert len(lines) == 2, lines
                run_id, text = lines
                assert run_id.startswith("run-writer-")
                assert text == "Hello from dev."
                assert "without the model's live text" not in errors.close()
                assert "/events" not in log.read_text()
                assert "GET /runs/" in (data / "api-access.log").read_text()
            except AssertionError as error:
                detail = f"--- dispatch --follow stderr:\n{errors.text}\n--- chamvi dev:\n{log.read_text()}"
                raise AssertionError(f"{error}\n{detail}") from None
        finally:
            paused.set()
            if dev.poll() is None:
                dev.send_signal(signal.SIGINT)
                try:
                    dev.wait(timeout=45)
                except subprocess.TimeoutExpired:
                    os.killpg(dev.pid, signal.SIGKILL)
                    dev.wait()
            if not group_gone(dev.pid):
                os.killpg(dev.pid, signal.SIGKILL)
