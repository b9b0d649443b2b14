"""Finding the tasks: nothing imports a task module by hand.

The tasks are found here, once, by whoever first looks a task or a data set up and does not find it
(``load_examples``, ``find_split_file``, ``task_named``, ``TASKS``, ``build_pipeline``, every ``kdspy`` command, a
suite's checks):

1. the built-in tasks: every module of the package ``knapsack_dspy.docqa.tasks`` but its support modules
   (:data:`SUPPORT_MODULES`), imported in the order of their names; each registers its ``Task`` -- and with it
   its files, for ``load_examples`` -- when imported (``register_task``);
2. then, when the name is still unknown or the tasks are listed, the installed plug-ins: each entry point of the
   group ``knapsack_dspy.tasks`` names a ``Task`` (``toyqa = "toy_package.toyqa:TASK"``; the entry point's name
   is the task's), registered here (``knapsack_dspy/plugins.py``: one that fails is left out with one
   ``PluginWarning`` line naming its distribution and its entry point).

The modules are named here as text and imported with ``importlib``: the data loader (below the tasks) finds the
tasks without importing them, and ``import knapsack_dspy`` imports none.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading

from knapsack_dspy.plugins import TASKS_GROUP, load_plugins

__all__ = ["BUILT_IN_TASKS_PACKAGE", "SUPPORT_MODULES", "discover_tasks"]

#: the package whose modules are the built-in tasks, one per data set (it exports ``Task`` and ``register_task``)
BUILT_IN_TASKS_PACKAGE = "knapsack_dspy.docqa.tasks"
#: the modules of that package that hold no data set: the ``Task`` and its registry, the programs tasks build
SUPPORT_MODULES = frozenset({"task", "programs"})

_LOCK = threading.RLock()  # one thread imports; the others wait for the registry it fills
_DONE = {"built_in": False, "plugins": False}


def _tasks_package():
    return importlib.import_module(BUILT_IN_TASKS_PACKAGE)


def _import_built_in_tasks() -> None:
    package = _tasks_package()
    for module in sorted(info.name for info in pkgutil.iter_modules(package.__path__)):
        if module not in SUPPORT_MODULES and not module.startswith("_"):
            importlib.import_module(f"{BUILT_IN_TASKS_PACKAGE}.{module}")


def _register_plugin(entry_point, value) -> None:
    """A task plug-in's entry point names a ``Task`` of the same name: registered (it may have been already, by
    its own module)."""
    package = _tasks_package()
    if not isinstance(value, package.Task):
        raise TypeError(f"a {TASKS_GROUP} entry point names a Task ('module:TASK'), not {type(value).__name__}")
    if value.name != entry_point.name:
        raise ValueError(f"the entry point's name is not its task's ({value.name!r})")
    package.register_task(value)


def discover_tasks(*, plugins: bool = True) -> None:
    """Import the built-in task modules and, with ``plugins``, register the installed task plug-ins, each once
    (later calls return at once; so does a call made by a task module while they are being imported)."""
    with _LOCK:
        if not _DONE["built_in"]:
            _DONE["built_in"] = True
            try:
                _import_built_in_tasks()
            except BaseException:
                _DONE["built_in"] = False  # the next look-up tries again (and fails as loudly)
                raise
        if plugins and not _DONE["plugins"]:
            _DONE["plugins"] = True
            load_plugins(TASKS_GROUP, _register_plugin)
