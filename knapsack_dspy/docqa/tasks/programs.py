"""The programs the tasks build (``Task.build`` names one of these as ``"module:function"``; it is imported when a
program is built, so reading the registry -- ``kdspy score``, a suite's checks -- loads no DSPy)."""

from __future__ import annotations

from knapsack_dspy.docqa.pipelines.pipeline import DocumentQA, StatuteQA
from knapsack_dspy.docqa.pipelines.program_qa import ProgramQA

__all__ = ["QUESTION_PROGRAMS", "build_finqa_program", "build_statute_program", "document_program", "plain_program",
           "question_program"]

#: a question-answering task's pipelines -> the DSPy program each is (GSM8K's)
QUESTION_PROGRAMS = {"cot": "cot:question -> answer", "predict": "predict:question -> answer"}


def document_program(pipeline: str, *, route: str | None = None, top_n_paragraphs: int | None = 3,
                     retrieval: str | None = None, **options) -> DocumentQA:
    """A table + text program (``DocumentQA``): what a document task builds unless it says otherwise
    (``retrieval``, a statute strategy, does not apply)."""
    return DocumentQA(pipeline=pipeline, top_n_paragraphs=top_n_paragraphs, route=route or None, **options)


def build_finqa_program(pipeline: str, **options) -> DocumentQA:
    """FinQA's programs: ``pot`` (the default) and ``python_pot`` write Python with FinQA's answer rules
    (``conventions="finqa"``), as SEER asks its model -- the language measured better on execution accuracy
    (issue 37: 35.3 % against the DSL's 26.7 % with the embedded 1.5B); ``finqa_pot`` writes the FinQA DSL (program
    accuracy is defined for it alone)."""
    if pipeline == "pot":
        pipeline = "python_pot"
    if pipeline == "python_pot":
        options.setdefault("conventions", "finqa")
    return document_program(pipeline, **options)


def build_statute_program(pipeline: str, *, route: str | None = None, retrieval: str | None = None,
                          top_n_paragraphs: int | None = None, **options) -> StatuteQA:
    """``StatuteQA`` (``retrieval``: its statute strategy, default mentioned_only; no route, no paragraphs)."""
    if route:
        raise ValueError(f"route={route!r} routes table + text questions; SARA has none")
    return StatuteQA(pipeline=pipeline, retrieval=retrieval or "mentioned_only", **options)


def plain_program(spec: str, *, route: str | None = None, retrieval: str | None = None,
                  top_n_paragraphs: int | None = None, **options) -> ProgramQA:
    """A plain DSPy program a suite names (``ProgramQA(spec)``: no route, retrieval or paragraphs)."""
    if route:
        raise ValueError(f"route={route!r} routes table + text questions; a plain DSPy program has none")
    return ProgramQA(spec, **options)


def question_program(pipeline: str, **options) -> ProgramQA:
    """A question alone answered by ``QUESTION_PROGRAMS[pipeline]`` (``dspy.ChainOfThought("question -> answer")``
    for ``cot``)."""
    return plain_program(QUESTION_PROGRAMS[pipeline], **options)
