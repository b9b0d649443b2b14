"""Compare two ``kdspy bench`` results directories: are the selections, scores and report figures the same?

    python benchmarks/compare_results.py DIR_A DIR_B [--match spec] [--ignore FIELD ...] [--show 5] [--json]

(``benchmarks/compare_results.py`` runs :func:`main`.)

Behaviour checks use it: run the same suite from two commits (e.g. ``git archive <commit> | tar -x -C ../base``
and the working tree) into two directories, then compare. Exit status 0 when nothing differs, 1 otherwise
(2 for unreadable input).

- **Rows** (``predictions.jsonl`` or the committed ``.xz`` / ``.gz``, read through ``results_store.load_rows``: rows of
  an older schema version are migrated first) are matched by ``(run key, example id)``; ``--match spec`` matches by the
  readable part of the run key (dataset, pipeline, selector, budget, M, model, retrieval) without its settings
  digest, for directories written by code whose ``RunSpec`` fields differ. Every field of a matched row is
  compared (exemplar ids and their order, prompt tokens, within-budget, answers, scores, selection quality,
  errors, ...) except what is timing or bookkeeping: ``latency_s``, ``selection_ms``, ``lm_seconds``,
  ``traceback``, ``provenance`` (which commit and packages wrote the row: two commits differ there by
  definition) and the ``spec`` dict (its digest is in the run key; with ``--match spec`` the ``run`` field is
  skipped too, in rows and figures). ``--ignore FIELD`` skips more.
- **Report figures** (``metrics.json``, per run) are compared the same way, numbers to 1e-9 relative, except
  timing figures (names with ``_ms``, ``latency``, ``seconds`` or ``time_per``: ``time_per_question``),
  ``provenance`` and ``spec``.

A resumed run can hold a row twice; the last one counts, as in the report.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

from knapsack_dspy.bench.results.store import ResultsFileError, load_rows, rows_file
from knapsack_dspy.errors import KnapsackDspyError

# provenance (the code commit, packages, ...) differs between two commits by definition: what this compares them by
ROW_IGNORED = frozenset({"latency_s", "selection_ms", "lm_seconds", "traceback", "spec", "provenance"})
METRIC_IGNORED = frozenset({"spec", "provenance"})
TIMING_MARKERS = ("_ms", "latency", "seconds", "time_per")


class ResultsReadError(KnapsackDspyError, ValueError):
    """A results directory or one of its files cannot be read."""


def run_label(run: str, match: str) -> str:
    """The run key, or with ``match == "spec"`` the key without its trailing settings digest."""
    if match == "spec" and "|" in run:
        return run.rsplit("|", 1)[0]
    return run


def read_rows(directory: Path, match: str) -> dict:
    """(run label, example id) -> row (``ResultRow``: migrated to the current schema, so rows written by two
    schema versions compare field by field); ``predictions.jsonl``, or committed ``predictions.jsonl.xz`` / ``.gz``."""
    try:
        path = rows_file(directory)  # predictions.jsonl, or the committed .xz / .gz
        if not path.is_file():
            raise ResultsReadError(f"{path}: no such file")
        rows = load_rows(path)
    except ResultsFileError as exc:
        raise ResultsReadError(str(exc)) from None
    return {(run_label(str(row.run), match), str(row.example_id)): row for row in rows}


def read_metrics(directory: Path, match: str) -> dict[str, dict]:
    path = directory / "metrics.json"
    if not path.is_file():
        return {}
    try:
        metrics = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultsReadError(f"{path}: not JSON ({exc.msg})") from None
    return {run_label(run, match): figures for run, figures in metrics.items()}


def same_value(a, b) -> bool:
    """Equal, with floats compared to 1e-9 relative (a re-computed mean may differ in the last bit)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def differing_fields(a: dict, b: dict, ignored: frozenset[str]) -> list[str]:
    names = (set(a) | set(b)) - ignored
    return sorted(name for name in names if not same_value(a.get(name, "<absent>"), b.get(name, "<absent>")))


def is_timing(name: str) -> bool:
    return any(marker in name for marker in TIMING_MARKERS)


def compare(dir_a: Path, dir_b: Path, match: str = "run", ignore: tuple[str, ...] = ()) -> dict:
    """What differs between the two directories (see the module docstring)."""
    rows_a, rows_b = read_rows(dir_a, match), read_rows(dir_b, match)
    by_spec = {"run"} if match == "spec" else set()
    row_ignored = ROW_IGNORED | set(ignore) | by_spec
    field_counts: Counter[str] = Counter()
    examples: dict[str, list] = {}
    for key in sorted(rows_a.keys() & rows_b.keys()):
        for name in differing_fields(rows_a[key], rows_b[key], frozenset(row_ignored)):
            field_counts[name] += 1
            examples.setdefault(name, []).append(
                {"run": key[0], "example_id": key[1], "a": rows_a[key].get(name), "b": rows_b[key].get(name)})
    metrics_a, metrics_b = read_metrics(dir_a, match), read_metrics(dir_b, match)
    metric_diffs = []
    for run in sorted(metrics_a.keys() & metrics_b.keys()):
        a, b = metrics_a[run], metrics_b[run]
        names = {n for n in set(a) | set(b) if not is_timing(n)} - METRIC_IGNORED - set(ignore) - by_spec
        metric_diffs += [{"run": run, "figure": n, "a": a.get(n), "b": b.get(n)}
                         for n in sorted(names) if not same_value(a.get(n), b.get(n))]
    return {
        "rows_a": len(rows_a), "rows_b": len(rows_b), "matched": len(rows_a.keys() & rows_b.keys()),
        "only_a": sorted(rows_a.keys() - rows_b.keys()), "only_b": sorted(rows_b.keys() - rows_a.keys()),
        "rows_differing": len({(e["run"], e["example_id"]) for ex in examples.values() for e in ex}),
        "fields": dict(field_counts), "examples": examples,
        "metric_runs_only_a": sorted(metrics_a.keys() - metrics_b.keys()),
        "metric_runs_only_b": sorted(metrics_b.keys() - metrics_a.keys()),
        "metric_diffs": metric_diffs,
    }


def identical(result: dict) -> bool:
    return not (result["only_a"] or result["only_b"] or result["rows_differing"] or result["metric_diffs"]
                or result["metric_runs_only_a"] or result["metric_runs_only_b"])


def print_summary(result: dict, show: int) -> None:
    print(f"rows: {result['rows_a']} in A, {result['rows_b']} in B, {result['matched']} matched, "
          f"{len(result['only_a'])} only in A, {len(result['only_b'])} only in B")
    for side in ("only_a", "only_b"):
        for run, example in result[side][:show]:
            print(f"  only in {side[-1].upper()}: {run} {example}")
    print(f"rows differing: {result['rows_differing']}")
    for name, count in sorted(result["fields"].items(), key=lambda kv: -kv[1]):
        print(f"  {name}: {count} rows")
        for example in result["examples"][name][:show]:
            print(f"    {example['run']} {example['example_id']}: A={example['a']!r} B={example['b']!r}")
    for side in ("metric_runs_only_a", "metric_runs_only_b"):
        for run in result[side]:
            print(f"  metrics.json run only in {side[-1].upper()}: {run}")
    print(f"report figures differing: {len(result['metric_diffs'])}")
    for diff in result["metric_diffs"][: max(show, 0) * 4]:
        print(f"  {diff['run']} {diff['figure']}: A={diff['a']!r} B={diff['b']!r}")
    print("IDENTICAL" if identical(result) else "DIFFERENT")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="compare_results.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir_a", type=Path)
    parser.add_argument("dir_b", type=Path)
    parser.add_argument("--match", choices=["run", "spec"], default="run",
                        help="match rows by the full run key (default) or by its readable part without the digest")
    parser.add_argument("--ignore", action="append", default=[], metavar="FIELD", help="also skip this row field")
    parser.add_argument("--show", type=int, default=5, help="examples shown per differing field (default 5)")
    parser.add_argument("--json", action="store_true", help="print the full comparison as JSON")
    args = parser.parse_args(argv)
    try:
        result = compare(args.dir_a, args.dir_b, args.match, tuple(args.ignore))
    except (ResultsReadError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({**result, "identical": identical(result)}, indent=2, default=str))
    else:
        print_summary(result, args.show)
    return 0 if identical(result) else 1
