"""One answering logic for ``forward`` and ``aforward``: a solver writes its steps once, as a generator that
yields the LM calls it needs (:class:`LMCall`) and receives each call's result, and two drivers run it:
:func:`run_plan` calls the predictors (``module(...)``), :func:`arun_plan` awaits them (``module.acall(...)``,
DSPy's async path). A reply the adapter cannot parse comes back as the ``AdapterParseError`` (the solvers
record it as an answer they could not read); any other error is thrown into the plan, so that the context it
holds open (a ``selection_log``, i.e. a ``dspy.context``) is left before the error propagates.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import dspy
from dspy.utils.exceptions import AdapterParseError

__all__ = ["LMCall", "Plan", "arun_plan", "run_plan"]


@dataclass(frozen=True)
class LMCall:
    """Call ``module`` with ``inputs``; ``demos``: the demos to send, ``None``: the predictor decides."""

    module: dspy.Module
    inputs: dict
    demos: list | None = None


Plan = Generator[LMCall, "dspy.Prediction | AdapterParseError", Any]


def _kwargs(call: LMCall) -> dict:
    return dict(call.inputs) if call.demos is None else {**call.inputs, "demos": call.demos}


def run_plan(plan: Plan):
    """Run ``plan``, calling each requested predictor; returns what the plan returns."""
    try:
        call = next(plan)
        while True:
            try:
                result = call.module(**_kwargs(call))
            except AdapterParseError as exc:
                result = exc
            except BaseException as exc:  # noqa: BLE001 - thrown into the plan: its contexts unwind, it re-raises
                call = plan.throw(exc)
                continue
            call = plan.send(result)
    except StopIteration as stop:
        return stop.value


async def arun_plan(plan: Plan):
    """Run ``plan``, awaiting each requested predictor through DSPy's async path; returns what the plan returns."""
    try:
        call = next(plan)
        while True:
            try:
                result = await call.module.acall(**_kwargs(call))
            except AdapterParseError as exc:
                result = exc
            except BaseException as exc:  # noqa: BLE001 - thrown into the plan: its contexts unwind, it re-raises
                call = plan.throw(exc)
                continue
            call = plan.send(result)
    except StopIteration as stop:
        return stop.value
