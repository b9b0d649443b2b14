"""Plug-ins from installed packages: the entry-point groups another distribution declares to add to the package.

Two groups (``importlib.metadata`` entry points, declared in the plug-in's ``pyproject.toml``)::

    [project.entry-points."knapsack_dspy.tasks"]
    toyqa = "toy_package.toyqa"                        # a module: importing it registers its task(s)

    [project.entry-points."knapsack_dspy.selectors"]
    shortest = "toy_package.selectors:ShortestSelector"  # an ExemplarSelector class, registered under "shortest"

Each group is read once, on first use, by the registry it adds to (``docqa/task_discovery.py``,
``selection/selectors/registry.py``). A plug-in that fails to load (an import error, a value of the wrong kind, a
name already taken) is left out with one :class:`PluginWarning` line naming its distribution and its entry point;
it never stops a command that does not need it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from knapsack_dspy.errors import KnapsackDspyWarning
from knapsack_dspy.messages import one_line

__all__ = ["SELECTORS_GROUP", "TASKS_GROUP", "PluginWarning", "describe_entry_point", "load_plugins", "warn_plugin"]

#: entry points naming a module that registers tasks when imported (``register_task``)
TASKS_GROUP = "knapsack_dspy.tasks"
#: entry points naming an ``ExemplarSelector`` class; the entry point's name is the selector's name
SELECTORS_GROUP = "knapsack_dspy.selectors"


class PluginWarning(KnapsackDspyWarning):
    """An installed plug-in (an entry point of ``TASKS_GROUP`` or ``SELECTORS_GROUP``) was left out: it did not load
    or gave something its group does not take."""


def describe_entry_point(entry_point) -> str:
    """``the knapsack_dspy.tasks entry point 'toyqa = toy_package.toyqa' of toy-package 0.1``."""
    dist = getattr(entry_point, "dist", None)
    origin = (f" of {dist.metadata['Name']} {dist.version}" if dist is not None and dist.metadata is not None
              else " (distribution unknown)")
    return f"the {entry_point.group} entry point '{entry_point.name} = {entry_point.value}'{origin}"


def warn_plugin(entry_point, problem: str) -> None:
    """One line: which plug-in was left out, and why (no source line: the plug-in's code is not ours)."""
    warnings.warn_explicit(one_line(f"{describe_entry_point(entry_point)} is left out: {problem}"), PluginWarning,
                           filename="knapsack_dspy.plugins", lineno=0)


def load_plugins(group: str, accept: Callable[[Any, Any], None]) -> int:
    """Load every entry point of ``group`` (in the order of their distributions' and their own names) and hand
    each loaded value to ``accept(entry_point, value)``, which registers it or raises ``TypeError`` /
    ``ValueError`` saying why it cannot. A plug-in that fails -- to load or to be accepted -- is a
    :class:`PluginWarning`, never an error. Returns how many were accepted."""
    from importlib.metadata import entry_points  # reads the installed distributions' metadata: when first needed

    found = sorted(entry_points(group=group),
                   key=lambda ep: (getattr(getattr(ep, "dist", None), "name", "") or "", ep.name, ep.value))
    accepted = 0
    for entry_point in found:
        try:
            accept(entry_point, entry_point.load())
        except Exception as exc:  # noqa: BLE001 -- another package's code: any failure leaves that plug-in out
            warn_plugin(entry_point, f"{type(exc).__name__}: {exc}")
        else:
            accepted += 1
    return accepted
