"""FinQA in Python against FinQA in the DSL (issue 37): the same questions, paired by question, intervals by page.

Reads the Python rows (``pipeline = "python_pot"``, ``benchmarks/finqa_python.toml``) and the DSL rows
(``finqa_pot``, ``benchmarks/finqa_tune.toml``, committed in ``benchmarks/results/finqa_tune_1p5b``) and pairs
each Python run with the DSL run of the same selector, budget, M and pool (no exemplar budget, no selector
parameters): per pair and per question range the execution accuracy of each (the official FinQA comparison: the
rows' ``correct``; an LM failure counts as wrong), Python − DSL with its 90 % interval bootstrapped by page (a
page's questions resampled together; ``metrics.paired.paired_comparison``) and per question, wins / losses and
McNemar's p. Per run also what can honestly be said beyond execution accuracy (``metrics.finqa_python``): programs
that gave no value, and the programs performing the gold program's operations (for the DSL also program accuracy,
defined for DSL programs only). Question ranges are positions in the runs' order (seed 26's): by default 1-150
and the clean part 61-150. The issue's gate: Python − DSL (KATE within budget, with demos) lower bound > 0 on 1-150.

    python experiments/finqa_python/finqa_python_vs_dsl.py benchmarks/results/finqa_python_1p5b benchmarks/results/finqa_tune_1p5b
        [--pairs kate_within_budget:kate_within_budget no_demos:no_demos] [--questions 1:150 61:150] [--json OUT]

A pair ``A:B`` names a Python selector and a DSL selector (``no_demos:kate_within_budget``: Python zero-shot
against the DSL with demos).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.bench.scoring.question_range import QuestionRangeError, order_key, questions_of_rows
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.metrics.finqa_python import same_operations
from knapsack_dspy.docqa.metrics.paired import paired_comparison

PYTHON, DSL = "python_pot", "finqa_pot"
DEFAULT_PAIRS = ("kate_within_budget:kate_within_budget", "no_demos:no_demos")
DEFAULT_RANGES = ("1:150", "61:150")
GATE_PAIR, GATE_RANGE = "kate_within_budget:kate_within_budget", "1:150"


def _load(results_dir: Path) -> list:
    try:
        return load_rows(results_dir)
    except ResultsFileError as exc:
        sys.exit(f"finqa_python_vs_dsl: {exc}")


def _setting(spec: dict) -> tuple:
    return (spec.get("budget"), spec.get("max_exemplars"), spec.get("pool_split"), spec.get("pool_dataset") or "")


def runs_of(rows, pipeline: str) -> dict[tuple, dict[str, object]]:
    """(selector, budget, M, pool) -> question id -> row, for the LM runs of ``pipeline`` without an exemplar
    budget or selector parameters (one run per key; two are an error)."""
    runs: dict[tuple, dict[str, object]] = {}
    keys: dict[tuple, set] = {}
    for row in rows:
        spec = row.spec
        if (spec.get("pipeline") != pipeline or spec.get("selection_only") or spec.get("exemplar_budget")
                or spec.get("selector_params")):
            continue
        key = (spec.get("selector"), *_setting(spec))
        keys.setdefault(key, set()).add(row.run)
        runs.setdefault(key, {})[row.example_id] = row
    for key, names in keys.items():
        if len(names) > 1:
            sys.exit(f"finqa_python_vs_dsl: {len(names)} {pipeline} runs of {key}: {', '.join(sorted(names))}")
    return runs


def _run(runs: dict, selector: str, setting: tuple | None, where: str):
    found = {key: rows for key, rows in runs.items() if key[0] == selector and (setting is None or key[1:] == setting)}
    if len(found) != 1:
        have = ", ".join(sorted({str(key[0]) for key in runs})) or "none"
        sys.exit(f"finqa_python_vs_dsl: {len(found)} runs of {selector!r} in the {where} rows"
                 + (f" with budget / M / pool {setting}" if setting else "") + f" (selectors there: {have})")
    return next(iter(found.items()))


def run_figures(rows: dict, questions: set[str], examples: dict) -> dict:
    """Execution accuracy, programs without a value, programs with the gold program's operations (and program
    accuracy, for the DSL) over ``questions``."""
    chosen = [rows[q] for q in sorted(questions)]
    n = len(chosen)
    python = bool(chosen) and chosen[0].spec.get("pipeline") == PYTHON
    out = {"n": n, "model": chosen[0].spec.get("model") if chosen else None,
           "execution_accuracy": 100.0 * sum(bool(r.correct) for r in chosen) / n if n else None,
           "no_value": sum(r.answer is None for r in chosen)}
    if python:
        agree = [same_operations(r.output or "", (examples.get(r.example_id) or {}).get("program") or "")
                 for r in chosen if r.answer is not None]  # the programs that ran
        known = [a for a in agree if a is not None]
        out["same_operations"] = 100.0 * sum(known) / len(known) if known else None
        out["operations_compared"] = len(known)
    else:
        programs = [bool(r.program_correct) for r in chosen if r.program_correct is not None]
        out["program_accuracy"] = 100.0 * sum(programs) / len(programs) if programs else None
    return out


def _in_points(difference: dict) -> dict:
    """A paired comparison of 0 / 1 scores with its means and bounds in points."""
    scaled = ("mean_a", "mean_b", "difference", "low", "high", "cluster_low", "cluster_high")
    return {k: (100.0 * v if k in scaled and v is not None else v) for k, v in difference.items()}


def compare(python_rows: list, dsl_rows: list, pairs, ranges, examples: dict) -> dict:
    """Per question range and pair: each side's figures and Python − DSL paired by question, by page."""
    python_runs, dsl_runs = runs_of(python_rows, PYTHON), runs_of(dsl_rows, DSL)
    if not python_runs:
        sys.exit(f"finqa_python_vs_dsl: no {PYTHON} LM rows")
    orders = {order_key(r.spec) for r in python_rows if r.spec.get("pipeline") == PYTHON} | {
        order_key(r.spec) for r in dsl_rows if r.spec.get("pipeline") == DSL}
    if len(orders) > 1:
        sys.exit("finqa_python_vs_dsl: the Python and DSL rows take their questions in different orders "
                 "(split, order_seed or example_ids): positions cannot pair them")
    out = {}
    reference = [r for r in python_rows if r.spec.get("pipeline") == PYTHON]
    for text in ranges:
        try:
            positions = questions_of_rows(reference, text)
        except QuestionRangeError as exc:
            sys.exit(f"finqa_python_vs_dsl: --questions {exc}")
        part = out[text] = {}
        for pair in pairs:
            mine, _, theirs = pair.partition(":")
            key, py = _run(python_runs, mine, None, "Python")
            _, dsl = _run(dsl_runs, theirs or mine, key[1:], "DSL")
            shared = positions & set(py) & set(dsl)
            if not shared:
                part[pair] = {"n": 0}
                continue
            groups = {q: py[q].doc_id or q for q in shared}
            a = {q: float(bool(py[q].correct)) for q in shared}  # 0 / 1: McNemar's test applies
            b = {q: float(bool(dsl[q].correct)) for q in shared}
            part[pair] = {"n": len(shared), "pages": len(set(groups.values())),
                          "python": run_figures(py, shared, examples), "dsl": run_figures(dsl, shared, examples),
                          "difference": _in_points(paired_comparison(a, b, groups=groups).to_dict())}
    return out


def _fmt(value, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def table(result: dict) -> str:
    lines = []
    for text, part in result.items():
        models = sorted({f"{side} {f[side]['model']}" for f in part.values() if f.get("n")
                         for side in ("python", "dsl")})
        lines += [f"FinQA, questions {text}: Python (python_pot) − DSL (finqa_pot), execution accuracy "
                  f"({'; '.join(models)})", "",
                  "| Python : DSL | n (pages) | Python EA | DSL EA | Python − DSL [90 % by page] [by question] "
                  "| wins / losses | McNemar p | no value (Py / DSL) | Python: gold operations | DSL: program acc. |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for pair, figures in part.items():
            if not figures.get("n"):
                lines.append(f"| {pair} | 0 | – | – | – | – | – | – | – | – |")
                continue
            d, py, dsl = figures["difference"], figures["python"], figures["dsl"]
            p = "–" if d["mcnemar_p"] is None else f"{d['mcnemar_p']:.2f}"
            lines.append(
                f"| {pair} | {figures['n']} ({figures['pages']}) | {_fmt(py['execution_accuracy'])} | "
                f"{_fmt(dsl['execution_accuracy'])} | {d['difference']:+.1f} [{d['cluster_low']:+.1f}, "
                f"{d['cluster_high']:+.1f}] [{d['low']:+.1f}, {d['high']:+.1f}] | {d['wins']} / {d['losses']} | {p} | "
                f"{py['no_value']} / {dsl['no_value']} | {_fmt(py.get('same_operations'))} "
                f"(of {py.get('operations_compared', 0)}) | {_fmt(dsl.get('program_accuracy'))} |")
        lines.append("")
    gate = result.get(GATE_RANGE, {}).get(GATE_PAIR)
    if gate and gate.get("n"):
        low = gate["difference"]["cluster_low"]
        lines.append(f"Gate (Python − DSL, {GATE_PAIR.split(':')[0]} with demos, questions {GATE_RANGE}, lower 90 % "
                     f"bound by page > 0): {low:+.1f} -> {'met' if low > 0 else 'not met'}"
                     + (f" on {gate['n']} questions" if gate["n"] < 150 else ""))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python_dir", type=Path, help="the Python rows (benchmarks/finqa_python.toml)")
    parser.add_argument("dsl_dir", type=Path, help="the DSL rows (benchmarks/results/finqa_tune_1p5b)")
    parser.add_argument("--pairs", nargs="+", default=list(DEFAULT_PAIRS), metavar="PY:DSL")
    parser.add_argument("--questions", nargs="+", default=list(DEFAULT_RANGES), metavar="FROM:TO")
    parser.add_argument("--python-pipeline", default=PYTHON,
                        help="the pipeline of the first directory's rows (finqa_pot: a DSL directory against itself)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    python_rows, dsl_rows = _load(args.python_dir), _load(args.dsl_dir)
    if args.python_pipeline != PYTHON:  # a check of the script: a directory's DSL rows against themselves
        python_rows = [r.replace({"spec": {**r.spec, "pipeline": PYTHON}}) for r in python_rows
                       if r.spec.get("pipeline") == args.python_pipeline]
    splits = {r.spec.get("eval_split") for r in python_rows if r.spec.get("pipeline") == PYTHON}
    examples = {ex["id"]: ex for split in sorted(s for s in splits if s)
                for ex in load_examples("finqa", split, data_dir=args.data_dir)}
    result = compare(python_rows, dsl_rows, args.pairs, args.questions, examples)
    print(table(result))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
