"""FinQA execution accuracy and program accuracy, as the official evaluation computes them
(``czyssrs/FinQA``, ``code/evaluate/evaluate.py``: ``eval_program``, ``equal_program``, ``evaluate_result``).

* **Execution accuracy**: the predicted program (official token form) is executed on the record's table
  (:func:`~knapsack_dspy.docqa.sandbox.finqa_executor.run_official_tokens`); it is correct when it is valid and
  its result, rounded to 5 decimals, equals the gold ``qa.exe_ans`` (``==``, gold as stored; ``"yes"`` /
  ``"no"`` compared as strings).
* **Program accuracy**: symbolic equivalence with the gold program (tokenized with the official
  tokenizer). Every number / constant argument of the gold program becomes a symbol (equal text, same
  symbol) and so does every whole table step (keyed by its official step text); ``#n`` references are
  expanded; both expressions go through ``sympy.simplify`` and are compared with ``==``, so
  ``add(a, b)`` equals ``add(b, a)`` and ``divide(subtract(a, b), b)``-style rewrites count when sympy
  makes them identical. A predicted argument that is not among the gold program's arguments, a reference
  to a later step, or a malformed program makes it wrong.
* Both are over the *predictions*: every prediction counts, gold records without a prediction are not
  counted; a prediction whose id is not in the gold file is an error.

Prediction files: the official format ``[{"id": ..., "predicted": [tokens..., "EOF"]}]`` or written-out
programs ``[{"id": ..., "program": "subtract(5829, 5735)"}]``, as a JSON list or JSONL (``.gz`` too).
Token lists are used exactly as given (the official code drops the last token as ``"EOF"`` unseen);
written-out programs are parsed with :func:`~knapsack_dspy.docqa.sandbox.finqa_dsl.parse_program` (one that
does not parse is wrong on both metrics).

Deviations (documented in ``docs/execution.md``): errors instead of crashes (unknown prediction id,
duplicate ids, a gold program the official code cannot read); a program that is symbolically equal but
executes differently is counted as program-correct and listed under ``inconsistent`` instead of stopping
the run at the official ``assert``; predicted programs whose expanded expression exceeds
:data:`MAX_EXPRESSION_CHARS` characters are not equal (the official code would try to simplify them);
program equivalence is bounded by input size: programs of more than :data:`MAX_CHECKED_STEPS` steps or whose
expanded expression has more than :data:`MAX_CHECKED_OPERATIONS` operations are not checked (not
program-correct, listed under ``program_check_skipped``; the official code could take minutes on one).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from knapsack_dspy import file_limits
from knapsack_dspy.docqa.data.errors import DataError
from knapsack_dspy.docqa.data.finqa import finqa_answer, program_fields
from knapsack_dspy.docqa.data.record_fields import get_table
from knapsack_dspy.docqa.metrics.errors import ScoringInputError
from knapsack_dspy.docqa.metrics.intervals import DEFAULT_LEVEL, proportion_ci
from knapsack_dspy.docqa.sandbox.finqa_dsl import (
    ALL_OPERATIONS,
    ProgramError,
    parse_program,
    program_to_tokens,
    steps_to_tokens,
)
from knapsack_dspy.docqa.sandbox.finqa_executor import run_official_tokens

__all__ = [
    "MAX_CHECKED_OPERATIONS",
    "MAX_CHECKED_STEPS",
    "MAX_EXPRESSION_CHARS",
    "FinQAScoreError",
    "ProgramCheck",
    "check_program",
    "execution_accuracy",
    "execution_match",
    "load_finqa_gold",
    "load_finqa_predictions",
    "program_accuracy",
    "program_match",
    "score_finqa",
    "score_finqa_files",
]

#: Longest symbolic expression (characters) a predicted program may expand to.
MAX_EXPRESSION_CHARS = 2_000
#: Program equivalence is checked only for programs (gold and predicted) of at most this many steps ...
MAX_CHECKED_STEPS = 20
#: ... whose expression, with every ``#n`` expanded, holds at most this many operations. ``sympy.simplify``
#: grows steeply with the expression: a continued fraction of 20 operations takes ~0.4 s, of 28 ~2 s, of 32
#: ~5 s and of 40 ~90 s (2 cores); FinQA gold programs have at most 6 steps. Bounds by input size, not a
#: clock, so a score never depends on the machine's load.
MAX_CHECKED_OPERATIONS = 20

_SYMPY_OPERATORS = {"add": "+", "subtract": "-", "multiply": "*", "divide": "/", "exp": "**", "greater": ">"}


@dataclass(frozen=True)
class ProgramCheck:
    """The outcome of a program-equivalence check: ``equal`` is ``None`` when it was not computed because a
    program exceeds the bounds (``skipped`` says which, e.g. ``"skipped: 40 steps > limit 20"``); the
    execution check is unaffected."""

    equal: bool | None
    skipped: str = ""


def _bound_problem(steps: dict, whose: str = "") -> str:
    """Why a program of these ``steps`` (index -> (text, op, arg, arg), references already checked to point
    backwards) is too large to check, or ``""``."""
    if len(steps) > MAX_CHECKED_STEPS:
        return f"skipped: {whose}{len(steps)} steps > limit {MAX_CHECKED_STEPS}"
    counts: dict[int, int] = {}
    for index in sorted(steps):  # references point backwards: every count it needs is known
        _, op, first, second = steps[index]
        counts[index] = 1 if "table" in op else 1 + sum(
            counts.get(int(arg.replace("#", "")), 0) for arg in (first, second) if "#" in arg)
    operations = counts[max(steps)] if steps else 0
    if operations > MAX_CHECKED_OPERATIONS:
        return (f"skipped: {whose}{operations} operations with every #n expanded > limit "
                f"{MAX_CHECKED_OPERATIONS}")
    return ""


class FinQAScoreError(ScoringInputError):
    """Bad gold or prediction input; the message (one line) names the file, record and field."""

    def __init__(self, message: str):
        super().__init__(message)


class _NotEquivalent(Exception):
    pass


# --------------------------------------------------------------------------------------------------------
# Official step splitting (shared by gold and prediction sides)
# --------------------------------------------------------------------------------------------------------
def _raw_steps(tokens: list[str]) -> list[str]:
    """Step texts the official way: the last token (EOF) dropped, tokens joined by ``|``, cut at ``)``,
    the piece after the last ``)`` dropped, each piece stripped of surrounding whitespace."""
    return [piece.strip() for piece in "|".join(tokens[:-1]).split(")")[:-1]]


def _step_parts(step: str) -> tuple[str, str, str]:
    """(operation, first argument, second argument) of a step text; IndexError when it has none."""
    head, rest = step.split("(")[0], step.split("(")[1]
    args = rest.strip("|").strip().split("|")
    return head.strip("|").strip(), args[0].strip(), args[1].strip()


def _structure_ok(tokens: list) -> bool:
    for position, token in enumerate(tokens[:-1]):
        if not isinstance(token, str):
            return False
        if position % 4 == 0 and token.strip("(") not in ALL_OPERATIONS:
            return False
        if position % 4 == 3 and token != ")":
            return False
    return True


def _expression(index: int, steps: dict[int, tuple[str, str, str, str]], symbols: dict[str, str]) -> str:
    """The official ``symbol_recur``: the expression of step ``index`` with ``#n`` expanded."""
    step, op, first, second = steps[index]
    if "table" in op:
        return symbols[step]
    parts = []
    for arg in (first, second):
        if "#" in arg:
            parts.append(_expression(int(arg.replace("#", "")), steps, symbols))
        else:
            parts.append(symbols[arg])
    if op not in _SYMPY_OPERATORS:
        raise _NotEquivalent(op)
    text = f"( {parts[0]} {_SYMPY_OPERATORS[op]} {parts[1]} )"
    if len(text) > MAX_EXPRESSION_CHARS:
        raise _NotEquivalent("expression too long")
    return text


class _GoldProgram:
    """The gold side of ``equal_program``: its symbol table and simplified expression (computed once)."""

    def __init__(self, tokens: list[str]):
        from sympy import simplify  # heavy; only program accuracy needs it

        self.symbols: dict[str, str] = {}
        self.steps: dict[int, tuple[str, str, str, str]] = {}
        raw = _raw_steps(tokens)
        if not raw:
            raise ValueError("the program has no complete step")
        for index, step in enumerate(raw):
            if len(step.split("(")) > 2:
                raise ValueError(f"step {index} has more than one '('")
            op, first, second = _step_parts(step)
            self.steps[index] = (step, op, first, second)
            if "table" in op:
                self._symbol(step)
            else:
                for arg in (first, second):
                    if "#" not in arg:
                        self._symbol(arg)
                    elif int(arg.replace("#", "")) >= index:
                        raise ValueError(f"step {index} refers to {arg}, not an earlier step")
        self.skipped = _bound_problem(self.steps, "the gold program has ")
        self.expression = None if self.skipped else simplify(
            _expression(len(raw) - 1, self.steps, self.symbols), evaluate=False)

    def _symbol(self, key: str) -> None:
        if key not in self.symbols:
            self.symbols[key] = f"a{len(self.symbols)}"

    def matches(self, predicted: list) -> bool:
        """The prediction side of the official ``equal_program`` (a check skipped by the bounds is False)."""
        return self.check(predicted).equal is True

    def check(self, predicted: list) -> ProgramCheck:
        """:meth:`matches` with the bounds made visible: the cheap checks first (structure, arguments that
        are gold arguments, references backwards: any failure is ``equal=False``), then the size bounds
        (``equal=None``, ``skipped`` says why), then sympy."""
        from sympy import simplify  # heavy; only program accuracy needs it

        if self.skipped:
            return ProgramCheck(None, self.skipped)
        try:
            if not _structure_ok(predicted):
                return ProgramCheck(False)
            steps: dict[int, tuple[str, str, str, str]] = {}
            raw = _raw_steps(predicted)
            for index, step in enumerate(raw):
                if len(step.split("(")) > 2:
                    return ProgramCheck(False)
                op, first, second = _step_parts(step)
                steps[index] = (step, op, first, second)
                if "table" in op:
                    if step not in self.symbols:
                        return ProgramCheck(False)
                    continue
                for arg in (first, second):
                    if "#" not in arg:
                        if arg not in self.symbols:
                            return ProgramCheck(False)
                    elif int(arg.strip("#")) >= index:
                        return ProgramCheck(False)
            skipped = _bound_problem(steps)
            if skipped:
                return ProgramCheck(None, skipped)
            expression = simplify(_expression(len(raw) - 1, steps, self.symbols), evaluate=False)
        except (_NotEquivalent, IndexError, KeyError, ValueError, TypeError, AttributeError, RecursionError):
            return ProgramCheck(False)
        except Exception:  # noqa: BLE001 -- the official code returns False for any failure here (sympy)
            return ProgramCheck(False)
        return ProgramCheck(bool(expression == self.expression))


# --------------------------------------------------------------------------------------------------------
# Per-prediction checks
# --------------------------------------------------------------------------------------------------------
def _tokens(predicted) -> list | None:
    """Official token list for a prediction: token lists as given, strings parsed (None if unparseable)."""
    if isinstance(predicted, (list, tuple)):
        return list(predicted)
    if isinstance(predicted, str):
        try:
            return steps_to_tokens(parse_program(predicted))
        except ProgramError:
            return None
    return None


def execution_match(predicted, table: list[list[str]] | None, exe_ans) -> bool:
    """Official execution check: the prediction (token list or written-out program) is valid on ``table``
    and its result rounded to 5 decimals ``==`` ``exe_ans``."""
    tokens = _tokens(predicted)
    if tokens is None:
        return False
    result = run_official_tokens(tokens, table)
    return bool(result.ok and result.answer == exe_ans)


def check_program(predicted, gold_program: str) -> ProgramCheck:
    """Official program equivalence of a prediction (token list or written-out program) with the gold
    program string (``qa.program``), within the bounds :data:`MAX_CHECKED_STEPS` and
    :data:`MAX_CHECKED_OPERATIONS` (beyond them ``equal`` is ``None`` and ``skipped`` says why). Raises
    :class:`FinQAScoreError` if the gold program is unreadable."""
    tokens = _tokens(predicted)
    if tokens is None:
        return ProgramCheck(False)
    return _gold(gold_program).check(tokens)


def program_match(predicted, gold_program: str) -> bool:
    """:func:`check_program` as a bool (a skipped check is ``False``)."""
    return check_program(predicted, gold_program).equal is True


def _gold(program: str, where: str = "gold program") -> _GoldProgram:
    try:
        return _GoldProgram(program_to_tokens(program))
    except (ValueError, IndexError, KeyError, TypeError, _NotEquivalent, ProgramError) as exc:
        raise FinQAScoreError(f"{where}: {program!r} cannot be read the official way "
                              f"({type(exc).__name__}: {exc})") from None


# --------------------------------------------------------------------------------------------------------
# Loading files
# --------------------------------------------------------------------------------------------------------
_READ_ERRORS = (OSError, UnicodeDecodeError, *file_limits.GZIP_ERRORS)


def _bounded(path: Path, read):
    """``read(path)`` (a reader of ``knapsack_dspy.file_limits``) with its failures as FinQAScoreError."""
    if not path.is_file():
        raise FinQAScoreError(f"{path}: file not found")
    try:
        return read(path)
    except file_limits.FileLimitError as exc:
        raise FinQAScoreError(f"{path}: {exc}") from None
    except _READ_ERRORS as exc:
        raise FinQAScoreError(f"{path}: cannot read ({exc})") from None


def _read_json_or_jsonl(path: Path):
    """A JSON file (one copy of its text held at a time), or JSON lines (also when a .json file is)."""
    if not path.name.removesuffix(".gz").endswith(".jsonl"):
        try:
            return _bounded(path, file_limits.read_json)
        except json.JSONDecodeError as exc:
            if not exc.doc.lstrip().startswith("{"):
                raise FinQAScoreError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    text = _bounded(path, file_limits.read_file_text)
    records, number = [], 0
    try:
        file_limits.check_text_values(text)
        for number, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    records.append(file_limits.parse_json(line))
                except json.JSONDecodeError as exc:
                    raise FinQAScoreError(f"{path}: line {number} is not valid JSON ({exc.msg})") from None
    except file_limits.FileLimitError as exc:
        raise FinQAScoreError(f"{path}: {f'line {number}: ' if number else ''}{exc}") from None
    return records


def _keyed_records(path: Path, data: list, seen: Mapping):
    """(where, id, record) for each record, checking it is an object with a new non-empty string ``id``
    (``seen``: the ids taken so far, filled by the caller)."""
    for index, record in enumerate(data):
        where = f"{path}: record {index}"
        if not isinstance(record, dict):
            raise FinQAScoreError(f"{where}: expected an object, got {type(record).__name__}")
        record_id = record.get("id")
        if not isinstance(record_id, str) or not record_id:
            raise FinQAScoreError(f"{where}: field 'id' is missing or not a string")
        where = f"{where} (id {record_id!r})"
        if record_id in seen:
            raise FinQAScoreError(f"{where}: duplicate id")
        yield where, record_id, record


def load_finqa_gold(path: str | Path) -> dict[str, dict]:
    """Gold records by id from an official FinQA JSON file (``.json`` / ``.json.gz``), checked: each record
    has a unique ``id``, a ``table`` (list of rows), ``qa.program`` and ``qa.exe_ans`` (a number or
    ``"yes"`` / ``"no"``)."""
    path = Path(path)
    data = _read_json_or_jsonl(path)
    if not isinstance(data, list):
        raise FinQAScoreError(f"{path}: expected a JSON list of FinQA records, got {type(data).__name__}")
    gold: dict[str, dict] = {}
    for where, record_id, record in _keyed_records(path, data, gold):
        table = record.get("table")
        if not isinstance(table, list) or not all(isinstance(row, list) for row in table):
            raise FinQAScoreError(f"{where}: field 'table' must be a list of rows")
        qa = record.get("qa")
        if not isinstance(qa, dict):
            raise FinQAScoreError(f"{where}: field 'qa' is missing or not an object")
        if not isinstance(qa.get("program"), str) or not qa["program"].strip():
            raise FinQAScoreError(f"{where}: field 'qa.program' is missing or not a string")
        answer = qa.get("exe_ans")
        if isinstance(answer, bool) or not (isinstance(answer, (int, float)) or answer in ("yes", "no")):
            raise FinQAScoreError(f"{where}: field 'qa.exe_ans' must be a number or 'yes'/'no', got {answer!r}")
        try:  # and what the loader (knapsack_dspy.docqa.data.finqa) checks of the same fields
            get_table(table, "table", required=True)
            program_fields(qa["program"], "qa.program")
            finqa_answer(answer, "qa.exe_ans")
        except DataError as exc:
            raise FinQAScoreError(f"{where}: field {exc.field!r}: {exc.problem}") from None
        gold[record_id] = record
    return gold


def load_finqa_predictions(path: str | Path) -> dict[str, list | str]:
    """Predictions by id: ``{"id", "predicted": [tokens]}`` or ``{"id", "program": "..."}`` records, as a JSON
    list or JSONL (``.gz`` too). Duplicate ids and records without a prediction are errors."""
    path = Path(path)
    data = _read_json_or_jsonl(path)
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        raise FinQAScoreError(f"{path}: expected a JSON list of predictions, got {type(data).__name__}")
    predictions: dict[str, list | str] = {}
    for where, record_id, record in _keyed_records(path, data, predictions):
        if "predicted" in record:
            predicted = record["predicted"]
            if not isinstance(predicted, (list, str)):
                raise FinQAScoreError(f"{where}: field 'predicted' must be a list of tokens (or a program string)")
        elif "program" in record:
            predicted = record["program"]
            if not isinstance(predicted, str):
                raise FinQAScoreError(f"{where}: field 'program' must be a string")
        else:
            raise FinQAScoreError(f"{where}: needs a field 'predicted' (token list) or 'program' (string)")
        predictions[record_id] = predicted
    return predictions


# --------------------------------------------------------------------------------------------------------
# Scores
# --------------------------------------------------------------------------------------------------------
def _pairs(predictions: Mapping | Iterable, gold: Mapping[str, dict]) -> list[tuple[str, object, dict]]:
    items = list(predictions.items() if isinstance(predictions, Mapping) else predictions)
    unknown = [record_id for record_id, _ in items if record_id not in gold]
    if unknown:
        shown = ", ".join(map(repr, unknown[:5])) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
        raise FinQAScoreError(f"prediction id{'s' if len(unknown) > 1 else ''} {shown} not in the gold data")
    return [(record_id, predicted, gold[record_id]) for record_id, predicted in items]


def score_finqa(predictions: Mapping[str, list | str] | Iterable[tuple[str, list | str]],
                gold: Mapping[str, dict], *,
                details: bool = False) -> dict:
    """Execution and program accuracy (percent, 0-100) of ``predictions`` (id -> token list or program
    string) against ``gold`` (id -> official record), over the predictions.

    Returns ``execution_accuracy``, ``program_accuracy`` and their 90 % Wilson intervals
    (``execution_accuracy_ci90``, ``program_accuracy_ci90``, percent), ``count`` (predictions scored),
    ``invalid`` (predictions that did not execute), ``unparseable`` (written-out programs that did not
    parse), ``missing_predictions`` (gold records without a prediction, not counted), ``inconsistent``
    (ids equal as programs but not in execution) and, with ``details=True``, ``records``: one dict per
    prediction.
    """
    exe_correct = prog_correct = invalid = unparseable = 0
    inconsistent: list[str] = []
    skipped: list[str] = []
    records = []
    gold_cache: dict[str, _GoldProgram] = {}
    pairs = _pairs(predictions, gold)
    count = len(pairs)
    for record_id, predicted, record in pairs:
        tokens = _tokens(predicted)
        if tokens is None:
            unparseable += 1
            result = None
            exe_ok = prog_ok = False
        else:
            result = run_official_tokens(tokens, record["table"])
            exe_ok = bool(result.ok and result.answer == record["qa"]["exe_ans"])
            if record_id not in gold_cache:
                gold_cache[record_id] = _gold(record["qa"]["program"], f"gold record {record_id!r}: qa.program")
            check = gold_cache[record_id].check(tokens)
            prog_ok = check.equal is True
            if check.skipped:
                skipped.append(record_id)
        if result is not None and not result.ok:
            invalid += 1
        exe_correct += exe_ok
        prog_correct += prog_ok
        if prog_ok and not exe_ok:
            inconsistent.append(record_id)
        if details:
            records.append({
                "id": record_id,
                "execution_correct": exe_ok,
                "program_correct": prog_ok,
                "executed": None if result is None else result.answer,
                "error": "the program does not parse" if result is None else result.error,
                "gold": record["qa"]["exe_ans"],
                **({"program_check": check.skipped} if tokens is not None and check.skipped else {}),
            })
    if not count:
        raise FinQAScoreError("there are no predictions to score")
    exe_ci = proportion_ci(exe_correct, count, DEFAULT_LEVEL)
    prog_ci = proportion_ci(prog_correct, count, DEFAULT_LEVEL)
    scores = {
        "execution_accuracy": 100.0 * exe_correct / count,
        "program_accuracy": 100.0 * prog_correct / count,
        "execution_accuracy_ci90": [100.0 * exe_ci.low, 100.0 * exe_ci.high],
        "program_accuracy_ci90": [100.0 * prog_ci.low, 100.0 * prog_ci.high],
        "count": count,
        "invalid": invalid,
        "unparseable": unparseable,
        "missing_predictions": len(set(gold) - {record_id for record_id, _, _ in pairs}),
        "inconsistent": inconsistent,
        "program_check_skipped": skipped,
    }
    if details:
        scores["records"] = records
    return scores


def execution_accuracy(predictions: Mapping[str, list | str], gold: Mapping[str, dict]) -> float:
    """Official execution accuracy in percent (see :func:`score_finqa`)."""
    return score_finqa(predictions, gold)["execution_accuracy"]


def program_accuracy(predictions: Mapping[str, list | str], gold: Mapping[str, dict]) -> float:
    """Official program accuracy in percent (see :func:`score_finqa`)."""
    return score_finqa(predictions, gold)["program_accuracy"]


def score_finqa_files(gold_path: str | Path, predictions_path: str | Path, *, details: bool = False) -> dict:
    """Score a prediction file against an official FinQA gold file (see :func:`score_finqa`)."""
    gold = load_finqa_gold(gold_path)
    predictions = load_finqa_predictions(predictions_path)
    try:
        return score_finqa(predictions, gold, details=details)
    except FinQAScoreError as exc:
        raise FinQAScoreError(f"{predictions_path}: {exc}") from None
