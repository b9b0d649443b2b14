"""``Task``: one data set as the bench, the CLI and the reports use it, and the registry of tasks.

A task says where its questions are (a ``DatasetSpec``: folder, file names, splits, the record parser), how one
answer is scored (``score``: the row's score fields, ``correct`` among them, by the data set's official rule), which
programs answer it (``pipelines``, ``build``), what its pools are labelled with for selection (``attributes``), and
the rules a suite's runs of it follow (``routable``, ``takes_statute_budget``, ``cuts_demos``). One module per data
set declares one and registers it (``tatqa.py``, ``finqa.py``, ``finqa_cases.py``, ``sara.py``, ``gsm8k.py``): the
registry finds them on first use (``docqa/task_discovery.py``), with the tasks installed packages declare (the
entry-point group ``knapsack_dspy.tasks``); nothing else dispatches on a data set's name. A new data set is one task
module plus its record parser and its metric (``docs/tasks.md``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from knapsack_dspy.docqa.data.example_fields import DOCUMENT_ATTRIBUTES
from knapsack_dspy.docqa.data.loader import DatasetSpec, register_dataset, unregister_dataset
from knapsack_dspy.docqa.pipelines.pipeline_names import (
    AUTO_DEMO_CUT,
    AUTO_ROUTE,
    DEMO_CUT_SETTINGS,
    DOCUMENT_PIPELINES,
    ROUTED_PIPELINES,
    UNCUT,
    is_program_spec,
)
from knapsack_dspy.docqa.task_discovery import discover_tasks
from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["DOCUMENT_PROGRAM", "TASKS", "Task", "UnknownTaskError", "build_pipeline", "register_task", "task_named",
           "unregister_task"]

#: what a document task builds unless it says otherwise: a ``DocumentQA`` (``programs.document_program``)
DOCUMENT_PROGRAM = "knapsack_dspy.docqa.tasks.programs:document_program"
#: a plain DSPy program a suite names (``"cot:question -> answer"``, ``"my.module:factory"``): ``ProgramQA``
PLAIN_PROGRAM = "knapsack_dspy.docqa.tasks.programs:plain_program"


class UnknownTaskError(KnapsackDspyError, ValueError):
    """No task of that name is registered (the message lists those that are)."""


def _no_route(pipeline: str) -> str | None:
    return None


def _no_demo_cut(pipeline: str) -> Mapping[str, str]:
    return {}


@dataclass(frozen=True)
class Task:
    """One data set as the harness uses it (see the module docstring).

    ``build(pipeline, route=..., top_n_paragraphs=..., retrieval=..., **options)`` returns the program answering
    the task's questions (a function, or ``"module:function"``, imported when a program is built: reading the
    registry loads no DSPy) (``route`` already resolved: ``default_route(pipeline)`` unless a suite or the command
    names one); ``default_demo_cut(pipeline)``: what the pipeline's demos show unless told (``{"demo_table":
    "gold_rows", "demo_paragraphs": "gold"}``; ``{}``: the whole demo); ``cuts_demos``: its demos hold a table
    and text ``demo_table`` / ``demo_paragraphs`` may cut (SARA's do not); ``offers_evidence``: its programs can offer
    a query's evidence as pieces chosen with the demos (``evidence_selection="knapsack"``: ``DocumentQA``,
    ``StatuteQA``; a question-only task's cannot); ``score(example, prediction)`` the score
    fields of one answer (never called for a question that was not answered); ``score_on_error``: the fields a
    failed scoring sets beside ``correct=False``;
    ``file_scorer(gold, predictions)`` / ``file_figures``: ``kdspy score``'s official file format and the figures
    it prints; ``compile_splits``: ``kdspy compile``'s (pool, validation) splits; ``program_fields``: the example
    field a plain DSPy program's field of another name reads (``ProgramQA``'s ``field_map``: GSM8K's
    ``{"reasoning": "derivation"}``)."""

    name: str
    files: DatasetSpec
    score: Callable[[Any, Any], dict]
    score_name: str = "accuracy"
    pipelines: tuple[str, ...] = DOCUMENT_PIPELINES
    build: Callable[..., Any] | str = DOCUMENT_PROGRAM
    default_route: Callable[[str], str | None] = _no_route
    default_demo_cut: Callable[[str], Mapping[str, str]] = _no_demo_cut
    routable: bool = True
    takes_statute_budget: bool = False
    cuts_demos: bool = True
    offers_evidence: bool = True
    attributes: tuple[str, ...] = DOCUMENT_ATTRIBUTES
    compile_splits: tuple[str, str] = ("train", "dev")
    score_on_error: Mapping[str, Any] = field(default_factory=dict)
    file_scorer: Callable | None = None
    file_figures: tuple[tuple[str, str], ...] = ()
    description: str = ""
    program_fields: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"a task's name is a non-empty string, got {self.name!r}")
        if not isinstance(self.files, DatasetSpec) or self.files.name != self.name:
            raise ValueError(f"task {self.name!r}: files must be the DatasetSpec named {self.name!r}")
        if not callable(self.score):
            raise ValueError(f"task {self.name!r}: score must be a function")
        if not (callable(self.build) or (isinstance(self.build, str) and ":" in self.build)):
            raise ValueError(f"task {self.name!r}: build must be a function or 'module:function'")
        if not self.pipelines:
            raise ValueError(f"task {self.name!r}: no pipeline answers it")

    def program(self, pipeline: str, build: Callable[..., Any] | str | None = None, **options):
        """The program answering this task's questions with ``pipeline`` (``build``, or the one given; a task with
        ``program_fields`` passes them as ``field_map``)."""
        build = self.build if build is None else build
        if self.program_fields:
            options.setdefault("field_map", self.program_fields)
        if isinstance(build, str):
            module, _, name = build.partition(":")
            build = getattr(importlib.import_module(module), name)
        return build(pipeline, **options)

    def route_for(self, pipeline: str, route: str | None) -> str | None:
        """The route a program takes: ``AUTO_ROUTE`` -> ``default_route(pipeline)``; ``""`` / ``None``: none."""
        return self.default_route(pipeline) if route == AUTO_ROUTE else (route or None)

    def demo_cut_for(self, pipeline: str, **settings: str) -> dict[str, str]:
        """Each demo-cut setting (``demo_table``, ``demo_paragraphs``) as a program of ``pipeline`` takes it:
        ``AUTO_DEMO_CUT`` (or not given) -> ``default_demo_cut(pipeline)``'s value, ``"all"`` when it names none."""
        unknown = sorted(set(settings) - set(DEMO_CUT_SETTINGS))
        if unknown:
            raise ValueError(f"not a demo-cut setting: {', '.join(unknown)}; they are {', '.join(DEMO_CUT_SETTINGS)}")
        default = self.default_demo_cut(pipeline)
        return {name: default.get(name, UNCUT) if settings.get(name, AUTO_DEMO_CUT) == AUTO_DEMO_CUT
                else settings[name] for name in DEMO_CUT_SETTINGS}

    def routes(self, pipeline: str) -> bool:
        """Whether a route (extraction or a program, by answer type) may be named for ``pipeline``."""
        return self.routable and pipeline in ROUTED_PIPELINES


_REGISTRY: dict[str, Task] = {}


class _Tasks(Mapping):
    """name -> task, read-only (``register_task`` adds to it): a name not registered yet makes the tasks be found
    first (the built-in modules, then the installed plug-ins: ``docqa/task_discovery.py``), as does listing them."""

    def __getitem__(self, name: str) -> Task:
        if name not in _REGISTRY:
            discover_tasks()
        return _REGISTRY[name]

    def __contains__(self, name) -> bool:
        if name not in _REGISTRY:
            discover_tasks()
        return name in _REGISTRY

    def __iter__(self) -> Iterator[str]:
        discover_tasks()
        return iter(list(_REGISTRY))

    def __len__(self) -> int:
        discover_tasks()
        return len(_REGISTRY)

    def __repr__(self) -> str:
        return f"TASKS({', '.join(self)})"


#: name -> task, read-only (``register_task`` adds to it); every task is found on first use
TASKS = _Tasks()


def register_task(task: Task, *, replace: bool = False) -> Task:
    """Register ``task`` (and its files, for ``load_examples``); a name already taken is an error unless
    ``replace=True``. Returns the task."""
    if not isinstance(task, Task):
        raise TypeError(f"register_task: {task!r} is not a Task")
    if task.name in _REGISTRY and _REGISTRY[task.name] is not task and not replace:
        raise ValueError(f"register_task: the name {task.name!r} is taken (pass replace=True to replace it)")
    register_dataset(task.files, replace=replace)
    _REGISTRY[task.name] = task
    return task


def unregister_task(name: str) -> Task | None:
    """Forget the task ``name`` and its files (a test's or a notebook's own task); the task, or None."""
    task = _REGISTRY.pop(name, None)
    if task is not None:
        unregister_dataset(name)
    return task


def task_named(name: str) -> Task:
    """The task registered under ``name`` (the tasks found first when it is not: ``TASKS``); ``UnknownTaskError``
    listing the tasks otherwise."""
    try:
        return TASKS[name]
    except (KeyError, TypeError):
        raise UnknownTaskError(f"unknown dataset {name!r}; datasets: {', '.join(sorted(TASKS))}") from None


def build_pipeline(dataset: str = "tatqa", pipeline: str = "pot", *, retrieval: str | None = None,
                   top_n_paragraphs: int | None = 3, route: str | None = AUTO_ROUTE, demo_table: str = AUTO_DEMO_CUT,
                   demo_paragraphs: str = AUTO_DEMO_CUT, **options):
    """The program answering ``dataset``'s questions with ``pipeline`` (its task's ``build``): ``DocumentQA``
    for table + text data (``top_n_paragraphs``; ``route``: ``"auto"`` is the task's default route -- TAT-QA's
    program pipeline routed by answer type --, ``None`` / ``""`` one solver; ``demo_table`` / ``demo_paragraphs``:
    ``"auto"`` is the task's default demo cut -- TAT-QA's program pipeline shows the rows and paragraphs a demo's
    gold solution reads --, ``"all"`` the whole demo), ``StatuteQA`` for SARA
    (``retrieval``: its statute strategy). A ``pipeline`` naming a plain DSPy program (``"cot:question -> answer"``,
    ``"my.module:attribute"``: ``program_qa.make_program``) is that program for any task (``ProgramQA``; route,
    retrieval and paragraphs do not apply). Other keywords go to the program (``selection=``, selection settings,
    ``model``, ``embedder``, ...); the selection constrains the task's ``attributes`` unless told otherwise."""
    task = task_named(dataset)
    if "selection" not in options and "attributes" not in options:
        options["attributes"] = task.attributes
    cut = task.demo_cut_for(pipeline, demo_table=demo_table, demo_paragraphs=demo_paragraphs)
    options.update({name: value for name, value in cut.items() if value != UNCUT})  # "all": the program's own
    if is_program_spec(pipeline):  # a plain DSPy program, "cot:question -> answer" (docqa/pipelines/program_qa.py)
        return task.program(pipeline, build=PLAIN_PROGRAM, **options)
    return task.program(pipeline, route=task.route_for(pipeline, route), top_n_paragraphs=top_n_paragraphs,
                        retrieval=retrieval, **options)
