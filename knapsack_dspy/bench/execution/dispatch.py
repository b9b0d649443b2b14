"""The driver's loop: hand (run, example) tasks to workers, write each row as it comes back.

Workers compute rows; they never write. Whatever the workers are -- the driver itself (one worker), threads
(``--workers N``), Ray actors (``--ray``) -- the calling thread stays the only writer of ``predictions.jsonl``
(``ResultsStore``: its lock, exactly-once rows and resume are unchanged). Rows arrive in the order they finish,
so the file's order may differ from a one-worker run; reports do not depend on it.

A set of workers offers:

- ``capacity``: how many tasks may be in flight at once;
- ``submit(task)``: start a task (never blocks for long);
- ``next_row() -> (task, row)``: wait for the next finished row (any task's);
- ``close()``: stop; unfinished tasks are dropped (a resume answers them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from knapsack_dspy.bench.execution.run_job import Task
from knapsack_dspy.bench.results.row_schema import ResultRow

__all__ = ["Workers", "write_rows"]


class Workers(Protocol):
    capacity: int

    def submit(self, task: Task) -> None: ...

    def next_row(self) -> tuple[Task, ResultRow]: ...

    def close(self) -> None: ...


def write_rows(tasks: Iterable[Task], workers: Workers, store, *,
               check: Callable[[Task, ResultRow], None] | None = None,
               on_row: Callable[[Task, ResultRow], None] | None = None) -> int:
    """Run ``tasks`` on ``workers`` (at most ``workers.capacity`` in flight; ``tasks`` is consumed lazily, so a
    generator can compile a run's program when it reaches the run) and append every row to ``store`` as it
    arrives. ``check(task, row)`` may refuse a row by raising (nothing of it is written); ``on_row`` is told of
    every row. Returns the number of rows written (a row whose (run, example) the store already holds is not
    written twice). ``workers`` is closed on the way out, however the loop ends."""
    source = iter(tasks)
    in_flight, more, written = 0, True, 0
    try:
        while True:
            while more and in_flight < workers.capacity:
                task = next(source, None)
                if task is None:
                    more = False
                    break
                workers.submit(task)
                in_flight += 1
            if not in_flight:
                return written
            task, row = workers.next_row()
            in_flight -= 1
            row = row if isinstance(row, ResultRow) else ResultRow.build(row)  # a worker's fields, checked
            if check is not None:
                check(task, row)
            written += bool(store.append(row))
            if on_row is not None:
                on_row(task, row)
    finally:
        workers.close()
