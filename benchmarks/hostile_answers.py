"""Hostile answers through a full ``kdspy bench``: every row written, no crash, no stall, scoring per row.

A stub OpenAI-compatible server (``knapsack_dspy.testing.openai_stub_server``) plays the model and answers
each question with one hostile reply (``knapsack_dspy.testing.hostile_answers``): direct answers for TAT-QA
chain of thought (numbers of thousands of digits, infinities, lone surrogates, NUL bytes, a megabyte of text,
deep brackets, ...),
Python programs for TAT-QA program of thought, and FinQA programs built from each question's own gold
program (continued fractions and chains of 20-1000 steps, expressions that double per step, ...). The
suite runs as ``kdspy bench`` in a subprocess with a wall-clock limit; then every stored row is scored
again, timed (``bench.reporting.rescoring.rescore_row``, what ``--rescore`` does), and the script prints::

    hostile answers (distinct): 112 ... rows written: 133 of 133 ... exit code 0 ... internal errors: 0
    max row latency: ... s; max scoring time per row: ... s

Run: ``python benchmarks/hostile_answers.py`` (reads ``$KDSPY_DATA_DIR``; the LM cache is bypassed, the
embedding cache is the usual one). ``--json`` prints the summary as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import knapsack_dspy  # noqa: F401  (environment defaults first)

ROOT = Path(__file__).resolve().parents[1]
FINQA_PROGRAMS_PER_QUESTION = 19


def _assignments(data_dir: Path) -> tuple[dict, dict]:
    """(question -> hostile reply, run name -> example ids)."""
    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.testing.hostile_answers import hostile_finqa, hostile_python, hostile_texts

    tune = list(load_examples("tatqa", split="dev_tune", data_dir=data_dir))
    finqa = list(load_examples("finqa", path=data_dir / "finqa" / "train_docs.json.gz"))
    texts, programs = hostile_texts(), hostile_python()
    questions: dict[str, str] = {}
    runs: dict[str, list[str]] = {"cot": [], "pot": [], "finqa": []}
    unused = iter(ex for ex in tune)
    for run, replies in (("cot", texts), ("pot", programs)):
        for _, reply in replies:
            example = next(ex for ex in unused if ex.question not in questions)
            questions[example.question] = reply
            runs[run].append(example.id)
    finqa_examples = [ex for ex in finqa if ex.question not in questions][: 2 * FINQA_PROGRAMS_PER_QUESTION]
    for i, example in enumerate(finqa_examples):
        questions[example.question] = hostile_finqa(example.program)[i % FINQA_PROGRAMS_PER_QUESTION][1]
        runs["finqa"].append(example.id)
    return questions, runs


def _suite_text(runs: dict, api_base: str, finqa_path: Path) -> str:
    common = [
        'name = "hostile_answers"',
        'selector = "kate"',
        "budget = 4000",
        "max_exemplars = 2",
        'model = "openai/stub-model"',
        f'api_base = "{api_base}"',
        "attributes = []",
        "num_retries = 0",
    ]
    groups = [
        {"dataset": "tatqa", "pipeline": "cot", "example_ids": runs["cot"]},
        {"dataset": "tatqa", "pipeline": "pot", "example_ids": runs["pot"]},
        {
            "dataset": "finqa",
            "pipeline": "pot",
            "pool_path": str(finqa_path),
            "eval_path": str(finqa_path),
            "example_ids": runs["finqa"],
        },
    ]
    lines = list(common)
    for group in groups:
        lines.append("\n[[runs]]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in group.items()]
    return "\n".join(lines) + "\n"


def _rescore_times(out: Path, data_dir: Path) -> tuple[float, int]:
    """Max seconds to score one stored row again, and how many rows were scored."""
    from types import SimpleNamespace

    from knapsack_dspy.bench.programs.run_program import load_split
    from knapsack_dspy.bench.reporting.rescoring import rescore_row
    from knapsack_dspy.bench.results.store import load_rows

    rows = load_rows(out)
    splits: dict = {}
    worst, scored = 0.0, 0
    for row in rows:
        spec = row.spec
        key = (spec["dataset"], spec["eval_split"], spec["eval_path"])
        if key not in splits:
            where = SimpleNamespace(dataset=key[0], eval_split=key[1], eval_path=key[2])
            splits[key] = {ex.id: ex for ex in load_split(where, "eval", data_dir)}
        started = time.perf_counter()
        rescore_row(row, splits[key][row.example_id])
        worst = max(worst, time.perf_counter() - started)
        scored += 1
    return worst, scored


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data-dir", default=os.environ.get("KDSPY_DATA_DIR", str(ROOT.parent / "shared" / "data"))
    )
    parser.add_argument("--out", help="results directory (default: a new temporary one)")
    parser.add_argument(
        "--time-limit", type=float, default=3600, help="wall-clock seconds before the run counts as stalled"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # the re-scoring below would log each answer no metric can read
    from knapsack_dspy.testing.hostile_answers import hostile_python, hostile_texts, reply_by_question
    from knapsack_dspy.testing.openai_stub_server import StubOpenAIServer

    data_dir = Path(args.data_dir)
    out = Path(args.out or tempfile.mkdtemp(prefix="hostile_answers_"))
    questions, runs = _assignments(data_dir)
    distinct = len(hostile_texts()) + len(hostile_python()) + FINQA_PROGRAMS_PER_QUESTION
    with StubOpenAIServer(reply=reply_by_question(questions)) as server, tempfile.TemporaryDirectory() as tmp:
        suite = Path(tmp) / "hostile_answers.toml"
        suite.write_text(_suite_text(runs, server.base_url, data_dir / "finqa" / "train_docs.json.gz"))
        env = {
            **os.environ,
            "KDSPY_DATA_DIR": str(data_dir),
            "OPENAI_API_KEY": "stub",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
        started = time.perf_counter()
        try:
            bench = ["bench", str(suite), "--out", str(out), "--quiet", "--no-cache"]
            done = subprocess.run([sys.executable, "-m", "knapsack_dspy.cli.main", *bench], env=env,
                                  capture_output=True, text=True, timeout=args.time_limit, check=False)
            exit_code, stalled = done.returncode, False
        except subprocess.TimeoutExpired:
            exit_code, stalled, done = None, True, None
        seconds = time.perf_counter() - started
        requests = server.completion_count()
    from knapsack_dspy.bench.results.store import load_rows

    rows = load_rows(out)
    expected = sum(len(ids) for ids in runs.values())
    kinds: dict = {}
    for row in rows:
        kinds[str(row.error_kind)] = kinds.get(str(row.error_kind), 0) + 1
    worst_scoring, rescored = _rescore_times(out, data_dir)
    summary = {
        "hostile_answers_distinct": distinct,
        "questions": expected,
        "rows_written": len(rows),
        "unique_pairs": len({(r.run, r.example_id) for r in rows}),
        "exit_code": exit_code,
        "stalled": stalled,
        "internal_errors": kinds.get("internal", 0),
        "error_kinds": kinds,
        "program_checks_skipped": sum(1 for r in rows if r.get("program_check")),
        "rows_with_escaped_fields": sum(1 for r in rows if r.get("escaped")),
        "score_errors": sum(1 for r in rows if r.get("score_error")),
        "max_row_latency_s": max((r["latency_s"] for r in rows), default=None),
        "max_scoring_s_per_row": round(worst_scoring, 3),
        "rows_rescored": rescored,
        "lm_requests": requests,
        "wall_clock_s": round(seconds, 1),
        "results": str(out),
    }
    if done is not None and done.returncode not in (0,):
        summary["stderr_tail"] = done.stderr[-1000:]
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for key, value in summary.items():
            print(f"{key.replace('_', ' ')}: {value}")
    ok = (
        not stalled
        and exit_code == 0
        and len(rows) == expected == summary["unique_pairs"]
        and not summary["internal_errors"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
