"""Putting selecting predictors into a program, and loading a compiled program into a fresh student.

``KnapsackFewShot.compile`` replaces predictors by ``SelectingPredict`` s; a saved program (``program.save
("p.json")``) records, per predictor, whether it selects (its state holds a ``"selection"``). A fresh student
has plain ``dspy.Predict`` s there, and ``dspy.Predict.load_state`` would take the selection state for an
attribute, so :func:`load_compiled` first puts selecting predictors in place, then loads the state::

    program = load_compiled(MyProgram(), "p.json")      # or KnapsackFewShot.load(MyProgram(), "p.json")

A predictor with a large pool references a pool store (``knapsack_dspy.selection.pool_store``):
:func:`save_pool_stores` puts the program's stores in the ``pools/`` folder beside its file (``save_program``
does), and loading from a file looks there first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import dspy
from dspy.primitives.module import set_attribute_by_name
from dspy.utils import magicattr

from knapsack_dspy.modules.select_exemplars import SelectExemplars
from knapsack_dspy.modules.selecting_predict import SelectingPredict

__all__ = ["compile_report_of", "install_selecting_predictor", "load_compiled", "pool_stores_of", "predictor_at",
           "read_program_state", "save_pool_stores", "selecting_names"]


def read_program_state(path: str | Path) -> dict:
    """The JSON state a ``program.save("x.json")`` wrote (``ValueError`` naming the problem)."""
    from knapsack_dspy.file_limits import GZIP_ERRORS, read_json

    path = Path(path)
    try:
        state = read_json(path)  # bounded: size, nesting (FileLimitError is a ValueError)
    except FileNotFoundError:
        raise ValueError(f"program file {str(path)!r} not found") from None
    except GZIP_ERRORS as exc:
        raise ValueError(f"not a program JSON (a broken gzip file: {exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a program JSON ({exc})") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not a program JSON (not UTF-8 text: {exc.reason} at byte {exc.start})") from None
    if not isinstance(state, dict):
        raise ValueError("not a program JSON (expected an object of predictor states)")
    return state


def selecting_names(state: Mapping) -> list[str]:
    """The predictors a saved program state holds a selection for."""
    return [name for name, value in state.items() if isinstance(value, dict) and "selection" in value]


def predictor_at(program: dspy.Module, name: str):
    """The predictor called ``name`` in ``program`` (as ``named_predictors`` names it; ``"self"``: the program is
    a bare ``dspy.Predict``)."""
    return program if name == "self" else magicattr.get(program, name)


def install_selecting_predictor(program: dspy.Module, name: str, *, embedder: Any = None, token_counter: Any = None,
                                value: Callable | None = None) -> dspy.Module:
    """Put a ``SelectingPredict`` in place of the predictor called ``name`` (kept when it already is one; its
    signature, LM config, LM and demos carried over) and return the program: ``program`` itself, or, when the
    program is a bare ``dspy.Predict`` (``name == "self"``), the new ``SelectingPredict``."""
    current = predictor_at(program, name)
    if isinstance(current, SelectingPredict):
        if token_counter is not None:
            current.token_counter = token_counter
        if value is not None:
            current.selection.value = value
        return program
    if not isinstance(current, dspy.Predict):
        raise ValueError(f"{name!r} is a {type(current).__name__}, not a dspy.Predict")
    selecting = SelectingPredict.replacing(current, SelectExemplars(embedder=embedder, value=value),
                                           token_counter=token_counter, predictor_name=name)
    if name == "self":
        return selecting
    set_attribute_by_name(program, name, selecting)
    return program


def load_compiled(student: dspy.Module, path_or_state: str | Path | Mapping, *, embedder: Any = None,
                  token_counter: Any = None, value: Callable | Mapping[str, Callable] | None = None,
                  allow_unsafe_lm_state: bool = False) -> dspy.Module:
    """Load a program compiled by ``KnapsackFewShot`` into ``student`` (an instance of the same program, not
    compiled), in place, and return it (a bare ``dspy.Predict`` student: a new ``SelectingPredict``).

    ``embedder`` / ``token_counter``: used instead of the saved embedder model id / the model's tokenizer
    (tests, or an embedder object of your own). ``value``: the value function(s) the program was compiled
    with (code is not saved): one for every predictor or ``{predictor name: function}``.
    """
    if not isinstance(path_or_state, Mapping):
        from knapsack_dspy.selection.pool_store import searching, stores_beside  # a file: its stores beside it

        with searching(stores_beside(path_or_state)):  # its pool stores: saved beside it
            return load_compiled(student, read_program_state(path_or_state), embedder=embedder,
                                 token_counter=token_counter, value=value, allow_unsafe_lm_state=allow_unsafe_lm_state)
    state = dict(path_or_state)
    state.pop("metadata", None)
    if isinstance(student, dspy.Predict):  # a bare predictor saves its own state, not {name: state}
        if "selection" in state:
            student = install_selecting_predictor(student, "self", embedder=embedder, token_counter=token_counter,
                                                  value=value.get("self") if isinstance(value, Mapping) else value)
        student.load_state(state, allow_unsafe_lm_state=allow_unsafe_lm_state)
        student.compile_report = compile_report_of(student)
        return student
    predictors = dict(student.named_predictors())
    names = selecting_names(state)
    unknown = [n for n in names if n not in predictors]
    if unknown:
        raise ValueError(f"the saved program selects demos for {unknown}, which the student does not have; its "
                         f"predictors: {sorted(predictors)} (load it into the program it was compiled from)")
    for name in names:
        function = value.get(name) if isinstance(value, Mapping) else value
        student = install_selecting_predictor(student, name, embedder=embedder, token_counter=token_counter,
                                              value=function)
    expected = [name for name, _ in student.named_parameters()]
    missing = [name for name in expected if name not in state]
    if missing:
        raise ValueError(f"the saved program has no state for {missing}: it was saved from another program "
                         f"(it has {sorted(state)})")
    student.load_state(state, allow_unsafe_lm_state=allow_unsafe_lm_state)
    student.compile_report = compile_report_of(student)
    return student


def pool_stores_of(program: dspy.Module) -> list:
    """The pool stores ``program``'s selections hold (large pools), once each."""
    stores = {p.selection.store.hash: p.selection.store for _, p in program.named_predictors()
              if isinstance(p, SelectingPredict) and p.selection.store is not None}
    return list(stores.values())


def save_pool_stores(program: dspy.Module, program_path: str | Path) -> list[Path]:
    """Put the pool stores ``program``'s selections hold (large pools) in the ``pools/`` folder beside
    ``program_path`` (hard links where possible, else copies), so the program's folder is complete: copied
    elsewhere, it loads with an empty cache. Returns the stores' directories there."""
    from knapsack_dspy.selection.pool_store import copy_store, stores_beside

    return [copy_store(store, stores_beside(program_path)) for store in pool_stores_of(program)]


def compile_report_of(program: dspy.Module) -> dict:
    """The compile report of a compiled program, rebuilt from its selecting predictors' saved reports: what
    the whole compile did (``cost``, ``skipped`` predictors, fitted modules, teacher runs: each predictor keeps
    a copy under ``"compile"``) and ``{"predictors": {name: that predictor's report}}``."""
    reports = {name: dict(p.selection.compile_report) for name, p in program.named_predictors()
               if isinstance(p, SelectingPredict)}
    shared: dict = next((r["compile"] for r in reports.values() if isinstance(r.get("compile"), dict)), {})
    return {**shared, "predictors": {name: {k: v for k, v in r.items() if k != "compile"}
                                     for name, r in reports.items()}}
