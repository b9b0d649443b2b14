"""Workers in the driver's process: the driver itself (one worker) or ``N`` threads (``--workers N``).

Threads suit API models, whose calls wait on the network: ``N`` threads keep ``N`` requests in flight. They
share the run's program and LM (both are safe to call from several threads: selection never mutates a
predictor's demos, DSPy's LM and cache are thread-safe) and each task runs in a copy of the driver's
``contextvars`` context taken when it was submitted, so ``dspy.context`` settings and call counters of the
driver follow it into the thread, and what one example installs there (its prompt recorder, its call counter,
its ``dspy.context``) stays its own. The threads are daemons: an interrupted run does not wait for the LM
calls in flight (their rows are not written; a resume answers them).
"""

from __future__ import annotations

import contextvars
import queue
import threading
from collections import deque

from knapsack_dspy.bench.execution.example_runner import example_row
from knapsack_dspy.bench.execution.run_job import Task

__all__ = ["InlineWorkers", "ThreadWorkers", "local_row"]

_POLL_S = 0.2  # how often a waiting driver wakes (so Ctrl-C is seen at once)


def local_row(task: Task) -> dict:
    """The row of ``task`` computed in this process, with the driver's program and LM."""
    job = task.job
    return example_row(job.program, task.example, job.lm, job.fields, selection_only=job.selection_only)


class InlineWorkers:
    """One worker: the driver answers each task itself when its row is asked for (the sequential run)."""

    capacity = 1

    def __init__(self):
        self._tasks: deque[Task] = deque()

    def submit(self, task: Task) -> None:
        self._tasks.append(task)

    def next_row(self) -> tuple[Task, dict]:
        task = self._tasks.popleft()
        return task, local_row(task)

    def close(self) -> None:
        self._tasks.clear()


class ThreadWorkers:
    """``count`` daemon threads answering tasks; rows come back in the order they finish."""

    def __init__(self, count: int):
        if count < 1:
            raise ValueError(f"workers must be at least 1, got {count}")
        self.capacity = count
        self._todo: queue.SimpleQueue = queue.SimpleQueue()
        self._done: queue.SimpleQueue = queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._work, name=f"kdspy-worker-{i + 1}", daemon=True)
                         for i in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, task: Task) -> None:
        self._todo.put((contextvars.copy_context(), task))

    def _work(self) -> None:
        while True:
            item = self._todo.get()
            if item is None:
                return
            context, task = item
            try:
                self._done.put((task, context.run(local_row, task), None))
            except BaseException as exc:  # noqa: BLE001 - a bug in a worker is raised in the driver, not lost
                self._done.put((task, None, exc))

    def next_row(self) -> tuple[Task, dict]:
        while True:
            try:
                task, row, error = self._done.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            if error is not None:
                raise error
            return task, row

    def close(self) -> None:
        while True:  # tasks not started yet are dropped, not answered after the driver stopped listening
            try:
                self._todo.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._todo.put(None)
