"""SARA scores: entailment accuracy, numerical (tax amount) accuracy exact in dollars and within 10 %.

Gold: the cases file (``sara/cases_<split>.json.gz``): a list of ``{"id", "type": "entailment" | "numerical",
"label": "Entailment" | "Contradiction"}`` or ``{..., "answer": "$15037", "answer_value": 15037}``.
Predictions: ``{case_id: "Entailment" | "Contradiction" | amount}``; an amount may be a number or a string
(``"$15,037"``, ``"15037"``, ``"15037.0"``, ``"-$250"``).

Rules (see ``docs/metrics.md``):

- entailment: correct when the prediction, stripped (also of a final ``.``) and case-folded, is the gold label;
- numerical, exact: the amount rounded to whole dollars (half away from zero) equals the gold dollars;
- numerical, within 10 %: ``|predicted - gold| <= 0.10 * |gold|`` (for a gold of $0: exact);
- numerical, the SARA authors' rule (Holzenberger et al., 2020): ``|predicted - gold| / max(0.1 * gold,
  5000) < 1``, i.e. within 10 % of the gold or $5,000, whichever is larger (``numerical_authors_rule``; the
  paper's definition -- the training script of ``SgfdDttt/sara`` counts its hinge loss ``< 1``, which is
  ``< 2`` on this ratio);
- ``accuracy`` = (entailment correct + numerical exact) / all gold cases;
- a case without a prediction (or with an unreadable one) is wrong; prediction ids that are not gold cases
  are ignored and reported (``unknown_prediction_ids``), as in the TAT-QA official script.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.sara import read_gold_amount
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.intervals import Estimate, proportion_estimate
from knapsack_dspy.docqa.metrics.json_files import read_json_file
from knapsack_dspy.docqa.metrics.json_files import short_repr as _preview
from knapsack_dspy.docqa.number_text import number_text

__all__ = ["LABELS", "SaraCaseScore", "SaraResult", "evaluate_sara", "load_sara_gold", "load_sara_predictions",
           "parse_dollars", "score_sara_files", "score_sara_prediction", "within_authors_rule",
           "within_tolerance"]

LABELS = ("Entailment", "Contradiction")
RELATIVE_TOLERANCE = 0.10
AUTHORS_FLOOR_DOLLARS = 5000.0  # the SARA authors' rule: within max(10 % of the gold, $5,000)
_AMOUNT = re.compile(r"^(?P<sign>[-+])?\s*(?:\$|usd\s*)?\s*(?P<sign2>[-+])?\s*"
                     r"(?P<number>\d{1,3}(?:,\d{3})+(?:\.\d*)?|\d+(?:\.\d*)?|\.\d+)\s*(?:dollars?|usd)?\.?$",
                     re.IGNORECASE)


def parse_dollars(value) -> float | None:
    """A dollar amount from a number or a string such as ``"$15,037"``, ``"15037"``, ``"15037.0"``,
    ``"-$250"``, ``"$ 1,000.50"``, ``"12 dollars"``; ``None`` when it is not one amount (booleans, words,
    several numbers, NaN / infinity)."""
    text = number_text(value)
    if not isinstance(text, str):
        return text
    match = _AMOUNT.match(text)
    if not match or (match.group("sign") and match.group("sign2")):
        return None
    number = float(match.group("number").replace(",", ""))
    if not math.isfinite(number):  # 309 digits and more read as infinity
        return None
    return -number if (match.group("sign") or match.group("sign2")) == "-" else number


def _whole_dollars(amount: float) -> int:
    if abs(amount) >= 2.0**52:  # already a whole number (and beyond Decimal's default 28-digit precision)
        return int(amount)
    return int(Decimal(repr(amount)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _label_text(text: str) -> str:
    return text.strip().rstrip(".").strip().casefold()


def within_tolerance(predicted: float, gold: float, tolerance: float = RELATIVE_TOLERANCE) -> bool:
    """``|predicted - gold| <= tolerance * |gold|`` (a gold of 0 needs a prediction of 0 dollars)."""
    if gold == 0:
        return _whole_dollars(predicted) == 0
    return abs(predicted - gold) <= tolerance * abs(gold) + 1e-9


def within_authors_rule(predicted: float, gold: float) -> bool:
    """The SARA authors' numerical rule: ``|predicted - gold| / max(0.1 * gold, 5000) < 1``."""
    return abs(predicted - gold) < max(RELATIVE_TOLERANCE * gold, AUTHORS_FLOOR_DOLLARS)


@dataclass(frozen=True)
class SaraCaseScore:
    case_id: str
    case_type: str  # "entailment" | "numerical"
    correct: bool  # label match / exact dollars
    within_10pct: bool | None  # numerical cases only
    predicted: bool  # the case id had an entry in the predictions
    authors_rule: bool | None = None  # numerical cases only: within_authors_rule


def _gold_of(case: Mapping, source: str | None = None, where: str | None = None) -> tuple[str, str | float]:
    """(type, gold label or dollars) of a gold case, validated."""
    case_type = case.get("type")
    if case_type == "entailment":
        label = case.get("label")
        if label not in LABELS:
            raise ScoringInputError(f"expected one of {list(LABELS)}, got {label!r}", source=source, where=where,
                                    field="label")
        return case_type, label
    if case_type == "numerical":
        try:
            return case_type, read_gold_amount(case)[1]  # the loader's check of the gold amount
        except DataError as exc:
            raise ScoringInputError(exc.problem, source=source, where=where, field=exc.field) from None
    raise ScoringInputError(f"expected 'entailment' or 'numerical', got {case_type!r}", source=source,
                            where=where, field="type")


def score_sara_prediction(prediction, gold_case: Mapping) -> SaraCaseScore:
    """Score one prediction against one gold case (for use as a per-example metric)."""
    case_type, gold = _gold_of(gold_case)
    case_id = str(gold_case.get("id", ""))
    if case_type == "entailment":
        correct = isinstance(prediction, str) and _label_text(prediction) == str(gold).casefold()
        return SaraCaseScore(case_id, case_type, correct, None, prediction is not None)
    amount = parse_dollars(prediction)
    if amount is None:
        return SaraCaseScore(case_id, case_type, False, False, prediction is not None, False)
    return SaraCaseScore(case_id, case_type, _whole_dollars(amount) == _whole_dollars(gold),
                         within_tolerance(amount, gold), True, within_authors_rule(amount, gold))


def _gold_cases(cases, source: str | None) -> list[Mapping]:
    if not isinstance(cases, list):
        raise ScoringInputError(f"expected a JSON list of SARA cases, got a JSON {type(cases).__name__}",
                                source=source)
    seen: set[str] = set()
    for i, case in enumerate(cases):
        where = f"case {i}"
        if not isinstance(case, Mapping):
            raise ScoringInputError(f"expected an object, got {type(case).__name__}", source=source, where=where)
        case_id = case.get("id")
        if not isinstance(case_id, str) or not case_id:
            raise ScoringInputError("missing or not a non-empty string", source=source, where=where, field="id")
        where = f"case {i} (id {case_id!r})"
        if case_id in seen:
            raise ScoringInputError("duplicate case id", source=source, where=where, field="id")
        seen.add(case_id)
        _gold_of(case, source, where)
    return cases


def _check_predictions(predictions, source: str | None) -> Mapping:
    if not isinstance(predictions, Mapping):
        raise ScoringInputError('expected a JSON object {case_id: "Entailment" | "Contradiction" | amount}, '
                                f"got a JSON {type(predictions).__name__}", source=source)
    for case_id, value in predictions.items():
        if not (value is None or isinstance(value, (str, int, float))):
            raise ScoringInputError(f"expected a label, an amount or null, got {_preview(value)}", source=source,
                                    where=f"case id {case_id!r}")
    return predictions


def load_sara_gold(path: str | os.PathLike) -> list[Mapping]:
    """Gold cases of a SARA cases file (``.json`` or ``.json.gz``)."""
    cases = _gold_cases(read_json_file(path, "gold file"), str(path))
    if not cases:
        raise ScoringInputError("the gold file has no cases", source=str(path))
    return cases


def load_sara_predictions(path: str | os.PathLike) -> Mapping:
    """A predictions file ``{case_id: label | amount}`` (a case id given twice is an error)."""
    return _check_predictions(read_json_file(path, "predictions file", unique_keys=True), str(path))


@dataclass
class SaraResult:
    """SARA scores as :class:`Estimate` fractions with 90 % Wilson intervals; ``to_dict`` gives percent."""

    accuracy: Estimate
    entailment_accuracy: Estimate
    numerical_accuracy: Estimate
    numerical_within_10pct: Estimate
    numerical_authors_rule: Estimate
    count: int
    missing_predictions: int
    unknown_prediction_ids: list[str]
    cases: list[SaraCaseScore] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        out: dict = {"count": self.count}
        for name in ("accuracy", "entailment_accuracy", "numerical_accuracy", "numerical_within_10pct",
                     "numerical_authors_rule"):
            estimate: Estimate = getattr(self, name)
            pct = estimate.scaled(100.0).to_dict()
            out[name] = pct["value"]
            out[f"{name}_ci90"] = [pct["low"], pct["high"]]
        out["entailment_count"] = self.entailment_accuracy.n
        out["numerical_count"] = self.numerical_accuracy.n
        out["missing_predictions"] = self.missing_predictions
        out["unknown_prediction_ids"] = len(self.unknown_prediction_ids)
        return out


def _evaluate_cases(cases: list[Mapping], predictions: Mapping, level: float) -> SaraResult:
    scores = [score_sara_prediction(predictions.get(case["id"]), case) for case in cases]
    entailment = [s for s in scores if s.case_type == "entailment"]
    numerical = [s for s in scores if s.case_type == "numerical"]
    gold_ids = {case["id"] for case in cases}
    return SaraResult(
        accuracy=proportion_estimate(sum(s.correct for s in scores), len(scores), level),
        entailment_accuracy=proportion_estimate(sum(s.correct for s in entailment), len(entailment), level),
        numerical_accuracy=proportion_estimate(sum(s.correct for s in numerical), len(numerical), level),
        numerical_within_10pct=proportion_estimate(sum(bool(s.within_10pct) for s in numerical), len(numerical),
                                                   level),
        numerical_authors_rule=proportion_estimate(sum(bool(s.authors_rule) for s in numerical),
                                                   len(numerical), level),
        count=len(scores),
        missing_predictions=sum(1 for case in cases if case["id"] not in predictions),
        unknown_prediction_ids=[str(k) for k in predictions if k not in gold_ids],
        cases=scores,
    )


def evaluate_sara(gold_cases: list[Mapping], predictions: Mapping, *, level: float = 0.9) -> SaraResult:
    """Score ``predictions`` against in-memory gold cases (every gold case counts)."""
    return _evaluate_cases(_gold_cases(gold_cases, None), _check_predictions(predictions, None), level)


def score_sara_files(gold_path: str | os.PathLike, predictions_path: str | os.PathLike) -> dict:
    """SARA scores of a predictions file against a cases file: ``accuracy`` (percent), ``count`` and extras
    (per-type accuracies and counts, numerical within 10 %, 90 % CIs, missing / unknown ids)."""
    cases = load_sara_gold(gold_path)
    predictions = load_sara_predictions(predictions_path)
    return _evaluate_cases(cases, predictions, 0.9).to_dict()
