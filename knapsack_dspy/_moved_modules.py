"""Modules that moved, importable under their old names (with a ``DeprecationWarning``).

The document-QA application moved under ``knapsack_dspy.docqa`` (DEVELOPERS.md, "Three wings"); ``config`` (the data
and cache directories) is ``paths``. Code, scripts and
pickles that name a module where it was -- ``knapsack_dspy.metrics.tatqa``, ``knapsack_dspy.execution`` -- get the
module where it is now: the same module object, so its classes and functions are the ones the package uses.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

__all__ = ["MOVED", "install", "new_name"]

#: old module path -> new module path (a package's submodules follow it)
MOVED = {
    "knapsack_dspy.modules.solvers": "knapsack_dspy.docqa.solvers",
    "knapsack_dspy.modules.pipeline": "knapsack_dspy.docqa.pipelines.pipeline",
    "knapsack_dspy.modules.hybrid_retriever": "knapsack_dspy.docqa.pipelines.hybrid_retriever",
    "knapsack_dspy.modules.statute_retriever": "knapsack_dspy.docqa.pipelines.statute_retriever",
    "knapsack_dspy.modules.answer_type_router": "knapsack_dspy.docqa.pipelines.answer_type_router",
    "knapsack_dspy.data": "knapsack_dspy.docqa.data",
    "knapsack_dspy.retrieval": "knapsack_dspy.docqa.retrieval",
    "knapsack_dspy.execution": "knapsack_dspy.docqa.sandbox",
    "knapsack_dspy.metrics": "knapsack_dspy.docqa.metrics",
    "knapsack_dspy.signatures": "knapsack_dspy.docqa.signatures",
    "knapsack_dspy.numbers": "knapsack_dspy.docqa.number_text",
    "knapsack_dspy.table_layout": "knapsack_dspy.docqa.table_layout",
    "knapsack_dspy.config": "knapsack_dspy.paths",
}


def new_name(name: str) -> str | None:
    """Where module ``name`` is now; ``None`` when it did not move."""
    for old, new in MOVED.items():
        if name == old or name.startswith(old + "."):
            return new + name[len(old):]
    return None


class _Alias(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    _OWN = ("__name__", "__spec__", "__loader__", "__package__", "__path__", "__file__", "__cached__")

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        # the import system writes the alias's name, spec and loader on it: the module's own go back at exec
        self._own = {key: module.__dict__[key] for key in self._OWN if key in module.__dict__}
        return module

    def exec_module(self, module):
        for key in self._OWN:
            if key in self._own:
                module.__dict__[key] = self._own[key]
            else:
                module.__dict__.pop(key, None)


class _MovedFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        new = new_name(name)
        if new is None:
            return None
        warnings.warn(f"{name} moved to {new}", DeprecationWarning, stacklevel=2)
        return importlib.util.spec_from_loader(name, _Alias(new), is_package=True)


def install() -> None:
    """Make the old names importable (once per process)."""
    if not any(isinstance(finder, _MovedFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _MovedFinder())  # before the path finder, which would load a file twice
