"""Prompting modes shared by the answerers (the RAG-CoT comparison: zero-shot, few-shot, chain-of-thought).

- ``zero_shot``: ``dspy.Predict``; demos are never sent (``demos=[]`` on every call).
- ``few_shot``: ``dspy.Predict`` with the demos passed for the call.
- ``cot``: ``dspy.ChainOfThought`` (a ``reasoning`` output before the answer) with the demos.
- ``zero_shot_cot``: ``dspy.ChainOfThought`` without demos.

Demos are passed per call (``predictor(**inputs, demos=...)``); nothing is stored on the predictor, so
one module can serve threads that each use their own demos. ``demos=None`` in a demo-using mode lets the
predictor decide: its own ``demos`` (what a DSPy optimizer such as ``LabeledFewShot`` sets), or, for a
``SelectingPredict`` (``KnapsackFewShot``), those plus the exemplars it selects for the query.
"""

from __future__ import annotations

from collections.abc import Iterable

import dspy

__all__ = ["MODES", "build_predictor", "check_mode", "demos_for_call", "inner_predict", "uses_reasoning"]

MODES = ("zero_shot", "few_shot", "cot", "zero_shot_cot")


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    return mode


def uses_reasoning(mode: str) -> bool:
    return check_mode(mode) in ("cot", "zero_shot_cot")


def build_predictor(signature: type[dspy.Signature], mode: str) -> dspy.Module:
    """``dspy.ChainOfThought(signature)`` for the reasoning modes, else ``dspy.Predict(signature)``."""
    return dspy.ChainOfThought(signature) if uses_reasoning(mode) else dspy.Predict(signature)


def inner_predict(module: dspy.Module) -> dspy.Predict:
    """The ``dspy.Predict`` whose prompt the demos go into (``ChainOfThought`` wraps one)."""
    return module if isinstance(module, dspy.Predict) else module.predict


class DemoPredictorAccess:
    """The compile contract's ``predictor`` / ``signature`` for a solver module: the ``dspy.Predict`` inside
    the sub-module named by ``demo_module`` (the one whose prompt the demos go into)."""

    demo_module = "answer"

    @property
    def predictor(self) -> dspy.Predict:
        return inner_predict(getattr(self, self.demo_module))

    @property
    def signature(self) -> type[dspy.Signature]:
        return self.predictor.signature


def demos_for_call(mode: str, demos: Iterable | None) -> list | None:
    """The demos one call sends: none for the zero-shot modes; ``demos`` (mappings become ``dspy.Example``);
    ``None`` (when ``demos`` is ``None``): the predictor decides (its own demos, or a ``SelectingPredict``'s
    per-query selection)."""
    if check_mode(mode) in ("zero_shot", "zero_shot_cot"):
        return []
    if demos is None:
        return None
    return [d if isinstance(d, dspy.Example) else dspy.Example(**dict(d)) for d in demos]
