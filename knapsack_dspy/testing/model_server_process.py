"""``kdspy serve-model`` in a child process, for tests and benchmarks: started, found, killed and restarted.

    with ModelServerProcess("local/qwen2.5-coder-0.5b-instruct", slots=2) as server:
        ... --lm openai/qwen2.5-coder-0.5b-instruct --api-base {server.base_url} ...
        server.kill()      # SIGKILL: the process dies mid-call, as a crashed server would
        server.start()     # the same port again (a run's key holds its api_base: a resume needs the same one)

The child runs this interpreter (``python -m knapsack_dspy.cli.main serve-model``) with this environment (plus
``env``); its ready line gives the URL. Its stderr goes to a file (``stderr_text()``).
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["ModelServerProcess"]

_READY = re.compile(r"ready at (http://\S+/v1)")


def _read_lines(stream, lines: queue.SimpleQueue, kept: list[str]) -> None:
    for line in stream:
        kept.append(line)
        lines.put(line)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child, before it executes the server
    """Linux: the server gets SIGKILL when the process that started it dies (no orphaned server after a crashed
    test run); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class ModelServerProcess:
    """See the module docstring. ``port`` 0: a free one the first time, the same one on every restart."""

    def __init__(self, model: str, *, slots: int = 1, port: int = 0, ctx: int | None = None,
                 threads: int | None = None, batch_threads: int | None = None, prompt_cache: bool | None = None,
                 env: dict[str, str] | None = None, ready_timeout: float = 600.0):
        self.model = model
        self.slots = slots
        self.port = port
        self.ctx = ctx
        self.threads = threads
        self.batch_threads = batch_threads
        self.prompt_cache = prompt_cache
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.base_url: str | None = None
        self.ready_line = ""
        self._process: subprocess.Popen | None = None
        self._stdout: list[str] = []
        self._stderr = Path(tempfile.mkstemp(prefix="kdspy-serve-model-", suffix=".log")[1])

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "knapsack_dspy.cli.main", "serve-model", self.model, "--port", str(self.port),
                   "--slots", str(self.slots)]
        for option, value in (("--ctx", self.ctx), ("--threads", self.threads),
                              ("--batch-threads", self.batch_threads)):
            if value is not None:
                command += [option, str(value)]
        if self.prompt_cache is not None:
            command.append("--prompt-cache" if self.prompt_cache else "--no-prompt-cache")
        return command

    def start(self) -> ModelServerProcess:
        """Start the server (again) and wait for its ready line; ``RuntimeError`` with its stderr if it fails."""
        if self.running:
            return self
        lines: queue.SimpleQueue = queue.SimpleQueue()
        with self._stderr.open("ab") as stderr:
            self._process = subprocess.Popen(self.command(), stdout=subprocess.PIPE, stderr=stderr, text=True,
                                             env={**os.environ, **self.env}, preexec_fn=_die_with_parent)
        process = self._process
        threading.Thread(target=_read_lines, args=(process.stdout, lines, self._stdout), daemon=True).start()
        deadline = time.monotonic() + self.ready_timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.5)
            except queue.Empty:
                if process.poll() is not None:
                    break
                continue
            found = _READY.search(line)
            if found:
                self.ready_line = line.strip()
                self.base_url = found.group(1)
                self.port = int(self.base_url.rsplit(":", 1)[1].split("/", 1)[0])
                return self
        self.kill()
        raise RuntimeError(f"kdspy serve-model did not get ready: {self.stderr_text()[-2000:]}")

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def kill(self) -> None:
        """SIGKILL (a crash: no clean shutdown), and wait for it to be gone."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=60)

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM (a clean shutdown); SIGKILL if it has not ended within ``timeout``. Returns its exit code."""
        if self._process is None:
            return None
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        time.sleep(0.2)  # its last line read
        return self._process.returncode

    def stdout_text(self) -> str:
        """What the server printed so far (its ready line, and "stopped" after a clean stop), every start's."""
        return "".join(self._stdout)

    def stderr_text(self) -> str:
        try:
            return self._stderr.read_text(errors="replace")
        except OSError:
            return ""

    def __enter__(self) -> ModelServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
        self._stderr.unlink(missing_ok=True)
