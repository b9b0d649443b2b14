"""``AnswerStatuteQuestion``: statutory reasoning over tax law (SARA)."""

from __future__ import annotations

import dspy

__all__ = ["AnswerStatuteQuestion"]


class AnswerStatuteQuestion(dspy.Signature):
    """You are a tax lawyer. Apply the statute to the facts of the case.

    If the question is a statement, decide whether the statute and the facts entail it: answer
    Entailment or Contradiction. If the question asks for an amount (for example, how much tax is
    owed), answer with the amount in whole dollars, e.g. $15037."""

    statute: str = dspy.InputField(desc="the relevant sections of the US Internal Revenue Code")
    facts: str = dspy.InputField(desc="the facts of the case")
    question: str = dspy.InputField(desc="a statement to check, or a question asking for an amount")
    answer: str = dspy.OutputField(desc="Entailment, Contradiction, or a dollar amount such as $15037")
