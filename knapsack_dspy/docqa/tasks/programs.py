"""The programs the tasks build (``Task.build`` names one of these as ``"module:function"``; it is imported when a
program is built, so reading the registry -- ``kdspy score``, a suite's checks -- loads no DSPy)."""

from __future__ import annotations

from knapsack_dspy.docqa.pipelines.pipeline import DocumentQA, StatuteQA

__all__ = ["build_finqa_program", "build_statute_program", "document_program"]


def document_program(pipeline: str, *, route: str | None = None, top_n_paragraphs: int | None = 3,
                     retrieval: str | None = None, **options) -> DocumentQA:
    """A table + text program (``DocumentQA``): what a document task builds unless it says otherwise
    (``retrieval``, a statute strategy, does not apply)."""
    return DocumentQA(pipeline=pipeline, top_n_paragraphs=top_n_paragraphs, route=route or None, **options)


def build_finqa_program(pipeline: str, **options) -> DocumentQA:
    """FinQA's programs: ``pot`` writes the FinQA DSL (``finqa_pot``); ``python_pot`` writes Python with FinQA's
    answer rules (``conventions="finqa"``)."""
    if pipeline == "pot":
        pipeline = "finqa_pot"
    if pipeline == "python_pot":
        options.setdefault("conventions", "finqa")
    return document_program(pipeline, **options)


def build_statute_program(pipeline: str, *, route: str | None = None, retrieval: str | None = None,
                          top_n_paragraphs: int | None = None, **options) -> StatuteQA:
    """``StatuteQA`` (``retrieval``: its statute strategy, default mentioned_only; no route, no paragraphs)."""
    if route:
        raise ValueError(f"route={route!r} routes table + text questions; SARA has none")
    return StatuteQA(pipeline=pipeline, retrieval=retrieval or "mentioned_only", **options)
