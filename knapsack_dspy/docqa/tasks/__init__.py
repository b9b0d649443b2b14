"""The tasks: one module per data set (``tatqa``, ``finqa``, ``finqa_cases``, ``sara``, ``gsm8k``), each registering a
``Task`` the bench, the CLI and the reports read (``task.py``). Importing this package registers them."""

from knapsack_dspy.docqa.tasks import finqa, finqa_cases, gsm8k, sara, tatqa  # noqa: F401 -- each registers its task
from knapsack_dspy.docqa.tasks.task import (
    TASKS,
    Task,
    UnknownTaskError,
    build_pipeline,
    register_task,
    task_named,
)

__all__ = ["TASKS", "Task", "UnknownTaskError", "build_pipeline", "register_task", "task_named"]
