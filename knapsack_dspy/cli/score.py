"""``kdspy score``: score a predictions file against a gold file (FinQA, TAT-QA or SARA).

Stable interface (other tools call it exactly like this)::

    kdspy score finqa --gold PATH --predictions PATH --json   -> execution_accuracy, program_accuracy, count
    kdspy score tatqa --gold PATH --predictions PATH --json   -> exact_match, f1, count
    kdspy score sara  --gold PATH --predictions PATH --json   -> accuracy, count

Scores are percentages (0-100); extra keys (90 % CIs, per-type breakdowns, missing / unknown ids) may follow.
Without ``--json`` a readable table is printed. Bad or missing files: one error line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from knapsack_dspy.cli.main import UserError

EPILOG = """prediction formats:
  finqa  see knapsack_dspy.docqa.metrics.finqa (gold: the official FinQA JSON)
  tatqa  {"<question uid>": [answer, scale], ...}   (official; answer a string, number or list of spans)
  sara   {"<case id>": "Entailment" | "Contradiction" | amount, ...}   (amount: 15037, "$15,037", ...)

gold files may be .json or .json.gz. Gold questions without a prediction score 0; prediction ids that are
not in the gold file are ignored and counted (unknown_prediction_ids) -- use --strict to reject both.

examples:
  kdspy score tatqa --gold $KDSPY_DATA_DIR/tatqa/dev.json.gz \\
                    --predictions $KDSPY_DATA_DIR/tatqa/dev_sample_prediction.json
  kdspy score sara --gold $KDSPY_DATA_DIR/sara/cases_train.json.gz --predictions preds.json --json
"""

def register(subparsers) -> None:
    p = subparsers.add_parser("score", help="score a predictions file against gold (finqa, tatqa, sara, or a "
                                             "registered task with a file scorer)",
                              description=__doc__, epilog=EPILOG,
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset", help="which benchmark's metric to use: finqa, tatqa, sara (a registered task with a "
                                   "file scorer)")
    p.add_argument("--gold", required=True, metavar="PATH", help="gold file (.json or .json.gz)")
    p.add_argument("--predictions", required=True, metavar="PATH", help="predictions file (.json)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--strict", action="store_true",
                   help="fail when a gold id has no prediction or a prediction id is not in the gold file")
    p.set_defaults(func=run)


def _task(dataset: str):
    """The task whose official file scorer ``kdspy score`` runs (``UserError`` naming those that have one)."""
    from knapsack_dspy.docqa.tasks import TASKS

    scorable = sorted(name for name, task in TASKS.items() if task.file_scorer is not None)
    if dataset not in scorable:
        raise UserError(f"unknown dataset {dataset!r} (expected one of {', '.join(scorable)})")
    return TASKS[dataset]


def _check_file(path: str, what: str) -> None:
    p = Path(path)
    if not p.exists():
        raise UserError(f"{what} {path!r} not found")
    if not p.is_file():
        raise UserError(f"{what} {path!r} is not a file")


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _json_safe(value.item())
    return value


def score(dataset: str, gold: str, predictions: str, strict: bool = False) -> dict:
    """The scorer's result dict for ``dataset`` (raises :class:`UserError` for unusable input)."""
    scorer = _task(dataset).file_scorer
    _check_file(gold, "gold file")
    _check_file(predictions, "predictions file")
    try:
        result = scorer(gold, predictions)
    except (ValueError, OSError) as exc:  # ScoringInputError / DataError / JSON / gzip / unreadable file
        raise UserError(_one_line(exc)) from None
    if not isinstance(result, dict):
        raise UserError(f"the {dataset} scorer returned {type(result).__name__}, expected a dict")
    result = _json_safe(result)
    if strict:
        missing = result.get("missing_predictions") or 0
        unknown = result.get("unknown_prediction_ids") or 0
        unknown = len(unknown) if isinstance(unknown, list) else unknown
        if missing or unknown:
            raise UserError(f"--strict: {missing} gold id(s) without a prediction, {unknown} prediction id(s) "
                            f"not in the gold file {gold!r}")
    return result


def _format_value(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def _ci(result: dict, key: str) -> str:
    ci = result.get(f"{key}_ci90") or result.get(f"{key}_ci")
    if isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
        return f"[{ci[0]:.2f}, {ci[1]:.2f}]"
    return ""


def format_table(dataset: str, result: dict) -> str:
    """A readable table: headline metrics with 90 % CIs, then counts, then per-group breakdowns."""
    rows: list[tuple[str, str, str]] = []
    shown: set[str] = set()
    for key, label in _task(dataset).file_figures:
        if key in result:
            rows.append((label, _format_value(result[key]), _ci(result, key)))
            shown.add(key)
    for key, value in result.items():
        if key in shown or key.endswith(("_ci90", "_ci")) or isinstance(value, (dict, list)):
            continue
        rows.append((key.replace("_", " "), _format_value(value), _ci(result, key)))
    width = max(len(r[0]) for r in rows) if rows else 10
    lines = [f"{dataset} scores (90% confidence intervals in brackets)"]
    lines += [f"  {label:<{width}}  {value:>8}  {ci}".rstrip() for label, value, ci in rows]
    for key, value in result.items():
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            columns = sorted({c for v in value.values() for c in v})
            lines.append("")
            lines.append(f"  {key.replace('_', ' ')}:")
            name_width = max(len(str(k)) for k in value)
            lines.append("    " + " " * name_width + "".join(f"  {c:>12}" for c in columns))
            for name, stats in value.items():
                lines.append(f"    {name!s:<{name_width}}" +
                             "".join(f"  {_format_value(stats.get(c)):>12}" for c in columns))
    return "\n".join(lines)


def run(args) -> int:
    result = score(args.dataset, args.gold, args.predictions, strict=args.strict)
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        print(format_table(args.dataset, result))
    return 0
