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

__all__ = ["LMCall", "Plan", "PlannedAnswerer", "arun_plan", "run_plan"]


@dataclass(frozen=True)
class LMCall:
    """Call ``module`` with ``inputs``; ``demos``: the demos to send, ``None``: the predictor decides."""

    module: dspy.Module
    inputs: dict
    demos: list | None = None


Plan = Generator[LMCall, "dspy.Prediction | AdapterParseError", Any]


def _kwargs(call: LMCall) -> dict:
    return dict(call.inputs) if call.demos is None else {**call.inputs, "demos": call.demos}


class _Stepper:
    """Advances a plan: ``call`` is its pending LM call (``None`` once it returned ``result``)."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.result = None
        self.call = self._advance(lambda: next(plan))

    def _advance(self, step):
        try:
            return step()
        except StopIteration as stop:
            self.result = stop.value
            return None

    def resume(self, value) -> None:
        self.call = self._advance(lambda: self.plan.send(value))

    def fail(self, error: BaseException) -> None:
        """A parse error goes back to the plan as the call's result; any other is thrown into it (its contexts
        unwind, then it re-raises)."""
        if isinstance(error, AdapterParseError):
            self.resume(error)
        else:
            self.call = self._advance(lambda: self.plan.throw(error))


def run_plan(plan: Plan):
    """Run ``plan``, calling each requested predictor; returns what the plan returns."""
    stepper = _Stepper(plan)
    while (call := stepper.call) is not None:
        try:
            value = call.module(**_kwargs(call))
        except BaseException as error:  # noqa: BLE001 - handed to the plan, which re-raises all but parse errors
            stepper.fail(error)
            continue
        stepper.resume(value)
    return stepper.result


async def arun_plan(plan: Plan):
    """Run ``plan``, awaiting each requested predictor through DSPy's async path; returns what the plan returns."""
    stepper = _Stepper(plan)
    while (call := stepper.call) is not None:
        try:
            value = await call.module.acall(**_kwargs(call))
        except BaseException as error:  # noqa: BLE001 - handed to the plan, which re-raises all but parse errors
            stepper.fail(error)
            continue
        stepper.resume(value)
    return stepper.result


class PlannedAnswerer:
    """A solver's ``forward`` and ``aforward`` from its one ``_plan(...)`` generator (the same arguments)."""

    def forward(self, *args, **kwargs):
        return run_plan(self._plan(*args, **kwargs))

    async def aforward(self, *args, **kwargs):
        return await arun_plan(self._plan(*args, **kwargs))
