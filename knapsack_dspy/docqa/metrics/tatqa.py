"""TAT-QA exact match and numeracy-focused F1, with the official evaluation's behaviour.

Re-implements ``NExTplusplus/TAT-QA`` ``tatqa_eval.py`` / ``tatqa_metric.py`` / ``tatqa_utils.py`` (same
results, quirks included; see ``docs/metrics.md``). Per question:

1. An empty prediction (``""``, ``[]``, ``None``, and -- as officially -- the number ``0``) scores 0.
2. Gold answers: span / multi-span keep their list; arithmetic -> ``str(answer)``; count -> ``str(int(answer))``.
3. Gold and prediction are each turned into ONE string: items sorted, each number rewritten as
   ``"%.4f" % (round(value, 2) * scale)`` (or ``"%.4f" % value`` when written with ``%``), each non-number
   followed by the scale word, all joined by spaces. So a right number with a wrong scale scores 0, and the
   order of multi-span items does not matter.
4. A single unscaled numeric prediction is also tried as-is (``0.2342`` matches ``23.42`` percent).
5. Both strings are normalised (lower case, punctuation and articles dropped, number tokens canonical) and
   compared: EM = equal strings; F1 = token-set F1 rounded to 2 decimals (bags aligned 1-1 with the
   Hungarian method -- with one joined string per side this is a single pair). The best (EM, F1) pair over
   the tried prediction strings is kept; for arithmetic and count questions F1 := EM.

Dataset level: every gold question counts; a question missing from the predictions scores 0; prediction
uids absent from the gold file are ignored (as the official script does) and reported in
``unknown_prediction_ids``.
"""

from __future__ import annotations

import math
import os
import re
import string
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.tatqa import ANSWER_TYPES, read_gold_answer
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.intervals import Estimate, mean_estimate, proportion_estimate
from knapsack_dspy.docqa.metrics.json_files import read_json_file
from knapsack_dspy.docqa.metrics.json_files import short_repr as _preview
from knapsack_dspy.file_limits import MAX_INT_DIGITS

__all__ = [
    "OFFICIAL_SCALES",
    "TatqaQuestionScore",
    "TatqaResult",
    "answer_string",
    "evaluate_tatqa",
    "gold_answer_strings",
    "is_number",
    "load_tatqa_gold",
    "load_tatqa_predictions",
    "normalize_answer",
    "scale_multiplier",
    "score_tatqa_answer",
    "score_tatqa_files",
    "span_em_f1",
    "to_number",
]

OFFICIAL_SCALES = ("", "thousand", "million", "billion", "percent")

# --- numbers -------------------------------------------------------------------------------------------

_SCALE_WORDS = (("hundred", 100), ("thousand", 1000), ("million", 1_000_000), ("billion", 1_000_000_000),
                ("percent", 0.01))
_IGNORED_IN_NUMBERS = frozenset("'\"\\$€£¥%(),[]")
_FIRST_NUMBER = re.compile(r"([+-]?\d+(?:\.\d+)?)|[+-]?\.\d+")
_PARENTHESISED_NUMBER = re.compile(r"\([\d.\s]+\)")
_PERCENT_NUMBER = re.compile(r"[\d.\s]+%")
_NUMBER_WITH_WORD = re.compile(r"[\d.]+\s?[a-zA-Z]+")
_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def scale_multiplier(scale: str) -> int | float:
    """Multiplier named by a scale word: the first of hundred / thousand / million / billion / percent that
    occurs in ``scale`` (case-insensitive, substring); 1 for anything else, including ``""``."""
    lowered = scale.lower()
    for word, multiplier in _SCALE_WORDS:
        if word in lowered:
            return multiplier
    return 1


def _without_number_marks(text: str) -> str:
    return "".join(ch for ch in str(text) if ch not in _IGNORED_IN_NUMBERS)


def is_number(text: str) -> bool:
    """Whether ``text`` reads as a number: its first word (after dropping ``$ % , ( ) [ ]`` and quotes) parses
    as a float that is not NaN, and a second word, if any, is a scale word (``"5 million"``)."""
    words = [w for w in (_without_number_marks(w) for w in text.split()) if w]
    if not words:
        return False
    try:
        value = float(words[0])
    except ValueError:
        return False
    if math.isnan(value):
        return False
    return len(words) < 2 or scale_multiplier(words[1]) != 1


def _first_number(text: str) -> int | float | None:
    match = _FIRST_NUMBER.search(_without_number_marks(text))
    if match is None or match.group(1) is None:  # officially, a leading ".5" form yields no number
        return None
    literal = match.group(1)
    if "." not in literal and len(literal) > MAX_INT_DIGITS:  # officially a crash (int() refuses it)
        raise ValueError(f"a number of {len(literal)} digits is too long to score")
    return float(literal) if "." in literal else int(literal)


def to_number(text: str) -> int | float | None:
    """The value ``text`` writes, rounded to 4 decimals: the first number, times the scale word right after a
    number (``"1.5 million"``), negated when a number stands in parentheses, /100 when followed by ``%``."""
    number = _first_number(text)
    if number is None:
        return None
    word = _NUMBER_WITH_WORD.search(text)
    multiplier = scale_multiplier(word.group(0).lower()) if word else 1
    sign = -1 if _PARENTHESISED_NUMBER.search(text.strip()) else 1
    percent = 0.01 if _PERCENT_NUMBER.search(text.strip()) else 1
    try:
        return round(number * multiplier * sign * percent, 4)
    except OverflowError:  # an integer beyond the float range, scaled: officially a crash
        raise _too_large(text) from None


def _normalize_token(token: str) -> str:
    token = token.lower()
    if not is_number(token):
        token = "".join(ch for ch in token if ch not in _PUNCTUATION)
    if is_number(token):
        token = str(to_number(token))
    return " ".join(_ARTICLES.sub(" ", token).split())


def normalize_answer(text: str) -> str:
    """Official normalisation of an answer string, token by token (split on single spaces): lower case;
    punctuation dropped unless the token is a number; numbers rewritten canonically (``"1,234"`` ->
    ``"1234"``, ``"5.0000"`` -> ``"5.0"``); articles dropped; whitespace collapsed."""
    parts = [_normalize_token(token) for token in text.split(" ")]
    return " ".join(part for part in parts if part.strip()).strip()


# --- answer strings and EM / F1 --------------------------------------------------------------------------

def _sorted_items(items: Sequence) -> list:
    try:
        return sorted(items)
    except TypeError:  # mixed types (e.g. numbers and strings): the official script would crash here
        return sorted(items, key=str)


def answer_string(items: Sequence, scale: str) -> str:
    """The official single string for a list of answer items under ``scale`` (see the module docstring)."""
    pieces = []
    for item in _sorted_items(items):
        text = str(item)
        if is_number(text):
            value = to_number(text)
            if value is None:
                text = f"{text} {scale}" if scale else text
            else:
                text = _fixed_point(value if "%" in text else round(value, 2) * scale_multiplier(scale), text)
        elif scale:
            text = f"{text} {scale}"
        pieces.append(text)
    return " ".join(pieces)


def _too_large(text: str) -> ValueError:
    return ValueError(f"the number {text[:20]}... ({len(text)} characters) is too large to score")


def _fixed_point(value: float, text: str) -> str:
    """``"%.4f" % value``; a ``ValueError`` (not the official crash) for an integer beyond the float range."""
    try:
        return f"{value:.4f}"
    except OverflowError:
        raise _too_large(text) from None


def _f1(predicted: set, gold: set) -> float:
    common = len(gold & predicted)
    precision = common / len(predicted) if predicted else 1.0
    recall = common / len(gold) if gold else 1.0
    if precision == 0.0 and recall == 0.0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def _aligned_f1s(predicted: list[set], gold: list[set]) -> np.ndarray:
    """Per gold bag, the F1 of the bag it is paired with in the best 1-1 alignment (zeros pad the longer side)."""
    matrix = np.array([[_f1(p, g) for p in predicted] for g in gold], dtype=float).reshape(len(gold),
                                                                                          len(predicted))
    best = np.zeros(max(len(gold), len(predicted)))
    if matrix.size == 1:
        best[0] = matrix[0, 0]
        return best
    from scipy.optimize import (
        linear_sum_assignment,  # only multi-span answers need it; keeps kdspy score light
    )

    rows, cols = linear_sum_assignment(-matrix)
    for row, col in zip(rows, cols, strict=True):
        best[row] = max(best[row], matrix[row, col])
    return best


def span_em_f1(predicted: str | Sequence[str], gold: str | Sequence[str]) -> tuple[float, float]:
    """EM and F1 between answer strings (or lists of spans, aligned 1-1): EM 1.0 when the normalised spans
    are the same set and the same number; F1 the mean aligned token-set F1, rounded to 2 decimals."""
    predicted_spans = [predicted] if isinstance(predicted, str) else list(predicted)
    gold_spans = [gold] if isinstance(gold, str) else list(gold)
    predicted_norm = [normalize_answer(s) for s in predicted_spans]
    gold_norm = [normalize_answer(s) for s in gold_spans]
    em = 1.0 if set(predicted_norm) == set(gold_norm) and len(predicted_norm) == len(gold_norm) else 0.0
    f1s = _aligned_f1s([set(s.split()) for s in predicted_norm], [set(s.split()) for s in gold_norm])
    return em, float(np.round(np.mean(f1s), 2))


def gold_answer_strings(answer, answer_type: str) -> list:
    """Gold answer items as the official script reads them for an ``answer_type``."""
    if answer_type in ("span", "multi-span"):
        if not isinstance(answer, list):
            raise ValueError(f"a {answer_type} answer must be a list, got {type(answer).__name__}")
        return list(answer)
    if answer_type == "count":
        return [str(int(answer))]
    return [str(answer)]


def score_tatqa_answer(prediction, pred_scale: str | None, gold_answer, gold_scale: str,
                       answer_type: str) -> tuple[float, float]:
    """(EM, F1) in [0, 1] of one prediction (a string, a number or a list of spans) with its scale against one
    gold answer; for use as a per-example metric. Empty / falsy predictions score (0, 0). ``gold_answer`` is
    the official form or a loaded example's (``knapsack_dspy.docqa.data`` holds a span as one string, not a list).
    ``ValueError`` for a number the official script would crash on (an integer of more than 4,300 digits, or
    one beyond the float range once scaled)."""
    if not prediction:
        return 0.0, 0.0
    if answer_type == "span" and isinstance(gold_answer, str):
        gold_answer = [gold_answer]
    gold_items = gold_answer_strings(gold_answer, answer_type)
    if not gold_items:
        return 0.0, 0.0
    pred_scale = "" if pred_scale is None else pred_scale
    gold_string = answer_string(gold_items, gold_scale)
    items = prediction if isinstance(prediction, list) else [prediction]
    candidates = [answer_string(items, pred_scale)]
    if len(items) == 1:  # an unscaled bare number is also read as a fraction of the gold percentage
        text = str(items[0])
        if not pred_scale and "%" not in text and is_number(text):
            value = to_number(text)
            if value is not None:
                candidates.append(f"{value:.4f}")
    em, f1 = max(span_em_f1(candidate, gold_string) for candidate in candidates)
    if answer_type in ("arithmetic", "count"):
        f1 = em
    return float(em), float(f1)


# --- files ----------------------------------------------------------------------------------------------

def _gold_questions(contexts, source: str | None) -> list[dict]:
    if not isinstance(contexts, list):
        raise ScoringInputError(f"expected a JSON list of TAT-QA contexts, got a JSON {type(contexts).__name__}",
                                source=source)
    questions = []
    seen: dict[str, str] = {}
    for c, context in enumerate(contexts):
        if not isinstance(context, Mapping):
            raise ScoringInputError(f"expected an object, got {type(context).__name__}", source=source,
                                    where=f"context {c}")
        items = context.get("questions")
        if not isinstance(items, list):
            raise ScoringInputError("missing or not a list", source=source, where=f"context {c}",
                                    field="questions")
        for q, question in enumerate(items):
            where = f"context {c}, question {q}"
            if not isinstance(question, Mapping):
                raise ScoringInputError(f"expected an object, got {type(question).__name__}", source=source,
                                        where=where)
            uid = question.get("uid")
            if not isinstance(uid, str) or not uid:
                raise ScoringInputError("missing or not a non-empty string", source=source, where=where,
                                        field="uid")
            where = f"{where} (uid {uid!r})"
            if uid in seen:
                raise ScoringInputError(f"duplicate uid (first in {seen[uid]})", source=source, where=where,
                                        field="uid")
            seen[uid] = where
            _check_gold_question(question, source, where)
            questions.append(question)
    return questions


def _check_gold_question(question: Mapping, source: str | None, where: str) -> None:
    """The loader's checks of a question's gold fields (``knapsack_dspy.docqa.data.tatqa``), plus the official
    reading of its answer; :class:`ScoringInputError` naming the field."""
    for key in ("answer", "answer_type", "scale"):
        if key not in question:
            raise ScoringInputError("missing (is this the gold file, not the test questions?)",
                                    source=source, where=where, field=key)
    answer_type, scale = question["answer_type"], question["scale"]
    if answer_type not in ANSWER_TYPES:
        raise ScoringInputError(f"expected one of {list(ANSWER_TYPES)}, got {_preview(answer_type)}",
                                source=source, where=where, field="answer_type")
    if scale not in OFFICIAL_SCALES:
        raise ScoringInputError(f"expected one of {list(OFFICIAL_SCALES)}, got {_preview(scale)}",
                                source=source, where=where, field="scale")
    try:
        read_gold_answer(question, answer_type, "question")
        answer_string(gold_answer_strings(question["answer"], answer_type), scale)
    except DataError as exc:
        raise ScoringInputError(exc.problem, source=source, where=where, field="answer") from None
    except (TypeError, ValueError) as exc:
        raise ScoringInputError(str(exc), source=source, where=where, field="answer") from None


def _check_predictions(predictions, source: str | None) -> dict[str, tuple]:
    if not isinstance(predictions, Mapping):
        raise ScoringInputError("expected a JSON object {question_uid: [answer, scale]}, got a JSON "
                                f"{type(predictions).__name__}", source=source)
    checked = {}
    for uid, value in predictions.items():
        where = f"uid {uid!r}"
        if not isinstance(value, (list, tuple)) or len(value) != 2:
            raise ScoringInputError(f"expected [answer, scale], got {_preview(value)}", source=source, where=where)
        answer, scale = value
        if scale is not None and not isinstance(scale, str):
            raise ScoringInputError(f"the scale must be a string such as 'million' or '', got {scale!r}",
                                    source=source, where=where)
        if not _answer_form(answer):
            raise ScoringInputError("the answer must be a string, a number, a list of those or null, got "
                                    f"{_preview(answer)}", source=source, where=where)
        checked[uid] = (answer, scale)
    return checked


def _answer_form(answer) -> bool:
    """A prediction the official script can read: a string, a number, null, or a flat list of those."""
    if answer is None or isinstance(answer, (str, int, float)):
        return True
    return isinstance(answer, (list, tuple)) and all(isinstance(item, (str, int, float)) for item in answer)


def load_tatqa_gold(path: str | os.PathLike) -> list[dict]:
    """Gold questions of an official TAT-QA file (a list of contexts; ``.json`` or ``.json.gz``), in order."""
    questions = _gold_questions(read_json_file(path, "gold file"), str(path))
    if not questions:
        raise ScoringInputError("the gold file has no questions", source=str(path))
    return questions


def load_tatqa_predictions(path: str | os.PathLike) -> dict[str, tuple]:
    """An official prediction file ``{question_uid: [answer, scale]}`` (a uid given twice is an error)."""
    return _check_predictions(read_json_file(path, "predictions file", unique_keys=True), str(path))


@dataclass(frozen=True)
class TatqaQuestionScore:
    uid: str
    em: float
    f1: float
    answer_type: str
    answer_from: str | None
    gold_scale: str
    pred_scale: str | None
    predicted: bool  # the uid had an entry in the predictions


@dataclass
class TatqaResult:
    """Dataset-level TAT-QA scores (fractions in [0, 1]); ``to_dict`` gives percent."""

    exact_match: float
    f1: float
    count: int
    scale_accuracy: float  # official "scale score": non-empty predictions with the gold scale / all questions
    missing_predictions: int
    unknown_prediction_ids: list[str]
    exact_match_ci: Estimate
    f1_ci: Estimate
    by_answer_type: dict[str, dict] = field(default_factory=dict)
    by_answer_from: dict[str, dict] = field(default_factory=dict)
    questions: list[TatqaQuestionScore] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready summary in percent (per-question scores left out)."""
        return {
            "exact_match": 100.0 * self.exact_match,
            "f1": 100.0 * self.f1,
            "count": self.count,
            "exact_match_ci90": [self.exact_match_ci.low * 100.0, self.exact_match_ci.high * 100.0],
            "f1_ci90": [self.f1_ci.low * 100.0, self.f1_ci.high * 100.0],
            "scale_accuracy": 100.0 * self.scale_accuracy,
            "missing_predictions": self.missing_predictions,
            "unknown_prediction_ids": len(self.unknown_prediction_ids),
            "by_answer_type": self.by_answer_type,
            "by_answer_from": self.by_answer_from,
        }


def _breakdown(scores: list[TatqaQuestionScore], key) -> dict[str, dict]:
    groups: dict[str, list[TatqaQuestionScore]] = defaultdict(list)
    for score in scores:
        groups[str(key(score))].append(score)
    return {name: {"count": len(items),
                   "exact_match": 100.0 * sum(s.em for s in items) / len(items),
                   "f1": 100.0 * sum(s.f1 for s in items) / len(items)}
            for name, items in sorted(groups.items())}


def evaluate_tatqa(gold_contexts, predictions: Mapping, *, level: float = 0.9, seed: int = 0) -> TatqaResult:
    """Score ``predictions`` (``{uid: [answer, scale]}``) against ``gold_contexts`` (the official list of
    contexts). EM / F1 are averaged over ALL gold questions."""
    return _evaluate_questions(_gold_questions(gold_contexts, None), predictions, level=level, seed=seed)


def _evaluate_questions(questions: list[dict], predictions: Mapping, *, level: float = 0.9,
                        seed: int = 0, source: str | None = None) -> TatqaResult:
    predictions = _check_predictions(predictions, source)
    scores = []
    scale_hits = 0
    for question in questions:
        uid = question["uid"]
        answer, pred_scale = predictions.get(uid, (None, None))
        try:
            em, f1 = score_tatqa_answer(answer, pred_scale, question["answer"], question["scale"],
                                        question["answer_type"])
        except ValueError as exc:
            raise ScoringInputError(str(exc), source=source, where=f"uid {uid!r}") from None
        if answer and pred_scale == question["scale"] and gold_answer_strings(question["answer"],
                                                                              question["answer_type"]):
            scale_hits += 1
        scores.append(TatqaQuestionScore(uid, em, f1, question["answer_type"], question.get("answer_from"),
                                         question["scale"], pred_scale, uid in predictions))
    count = len(scores)
    gold_ids = {s.uid for s in scores}
    total_em = sum(s.em for s in scores)
    return TatqaResult(
        exact_match=total_em / count if count else 0.0,
        f1=sum(s.f1 for s in scores) / count if count else 0.0,
        count=count,
        scale_accuracy=scale_hits / count if count else 0.0,
        missing_predictions=sum(1 for s in scores if not s.predicted),
        unknown_prediction_ids=[uid for uid in predictions if uid not in gold_ids],
        exact_match_ci=proportion_estimate(total_em, count, level),
        f1_ci=mean_estimate([s.f1 for s in scores], level=level, seed=seed),
        by_answer_type=_breakdown(scores, lambda s: s.answer_type),
        by_answer_from=_breakdown(scores, lambda s: s.answer_from),
        questions=scores,
    )


def score_tatqa_files(gold_path: str | os.PathLike, predictions_path: str | os.PathLike) -> dict:
    """Official TAT-QA scores of a prediction file against a gold file: ``exact_match``, ``f1`` (percent),
    ``count`` and extras (90 % CIs, scale accuracy, missing / unknown ids, per answer type and source)."""
    questions = load_tatqa_gold(gold_path)
    predictions = load_tatqa_predictions(predictions_path)
    return _evaluate_questions(questions, predictions, source=str(predictions_path)).to_dict()
