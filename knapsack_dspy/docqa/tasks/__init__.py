"""The tasks: one module per data set (``tatqa``, ``finqa``, ``finqa_cases``, ``sara``, ``gsm8k``), each registering a
``Task`` the bench, the CLI and the reports read (``task.py``). Nothing lists them: the registry imports every module
of this package (but ``task`` and ``programs``) the first time a task or a data set is looked up, with the tasks
installed packages declare (``docqa/task_discovery.py``, docs/tasks.md)."""

from knapsack_dspy.docqa.tasks.task import (
    TASKS,
    Task,
    UnknownTaskError,
    build_pipeline,
    register_task,
    task_named,
    unregister_task,
)

__all__ = ["TASKS", "Task", "UnknownTaskError", "build_pipeline", "register_task", "task_named", "unregister_task"]
