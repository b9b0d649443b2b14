"""Embedded-model throughput, before and after (issue 13): questions per hour and EM on the same questions.

Cells: variant x mode x load, each a ``kdspy bench`` results directory under ``--out``:

- variants: ``baseline`` (commit d74d4f8, run from an export of it: ``git archive d74d4f8``), ``after`` (this
  checkout), ``after-omp-active`` (this checkout with ``OMP_WAIT_POLICY=ACTIVE``: the passive-waits fix alone);
- pipeline: program of thought; after's cells route span questions to extraction (``route = "extract_compute"``,
  the answer-quality work's configuration; ``--route ""``: one program-of-thought solver, as the baseline);
- modes: ``seer`` (per-query SEER), ``hybrid``, ``static``, and after only ``seer-canonical`` /
  ``hybrid-canonical`` (``demo_order = "canonical"``: the per-query demos in one order over the pool) and
  ``seer-latency<S>`` / ``hybrid-latency<S>`` (``latency_budget = S`` seconds, e.g. ``hybrid-latency12``: the
  per-query demos must also fit the latency model's budget, the declared shared prefix priced as cached) --
  TAT-QA dev_pool -> the first ``--limit`` dev_tune questions, program of thought,
  the 1.5B model, budget 2,048, M = 4, attributes modality + answer type, the LM cache off (``--no-cache``: every
  answer is computed);
- loads: ``quiet`` (nothing else running: check before you start) and ``busy`` (one busy-loop process beside the
  run, started and stopped by this script).

Runs are interleaved: in rounds of ``--chunk`` questions, every cell answers its next questions before any
cell goes on, variants of one mode back to back, so a drift in the machine's state hits every cell alike.
Resumable: every cell is a bench results directory (rows are never asked twice) and a round a cell has
finished is skipped; interrupt at any time and run the same command again. Each bench process runs through
``throughput_tap.py``, which logs every LM call's llama.cpp timings (``lm_calls.jsonl`` in the cell) for any
version of the code and loads the model before the first question.

    python experiments/throughput/throughput.py plan                     # the steps and an estimate of their LM time
    python experiments/throughput/throughput.py run [--limit 100] [--chunk 25] [--modes seer,hybrid,static]
                                        [--variants baseline,after] [--loads quiet,busy]
    python experiments/throughput/throughput.py run --cells baseline-seer,after-seer-latency16 --loads quiet  # chosen cells
    python experiments/throughput/throughput.py report [--json t.json]   # docs/results.md's table (from whatever is done)

The report gives per cell: questions, questions per hour (3,600 / mean seconds per question, from the rows'
``latency_s``), EM, the prompt-cache hit rate (prompt tokens reused / all prompt tokens, from the calls'
``cache_n`` / ``prompt_n``), prefill and decode seconds per question, LM seconds per question (the rows'
``lm_seconds``) beside the latency model's prediction (the rows' ``predicted_latency_s``: the first call, the
declared shared prefix taken as cached, ``knapsack_dspy/llm/latency_rates.py``'s rates; the baseline has none);
then each mode's speed-up over the
baseline's same mode and load, and each after-mode's paired EM difference against baseline per-query SEER
(90 % paired bootstrap; non-inferior when the lower bound is >= -5 EM).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from knapsack_dspy.testing.busy_loop import busy_loop

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BASELINE_COMMIT = "d74d4f8"
MODEL = "local/qwen2.5-coder-1.5b-instruct"
VARIANTS = ("baseline", "after", "after-omp-active")
MODES = ("seer", "seer-canonical", "hybrid", "hybrid-canonical", "static")
LATENCY_MODE = re.compile(r"^(seer|hybrid)-latency(\d+(?:\.\d+)?)$")  # e.g. hybrid-latency12: latency_budget = 12 s
LOADS = ("quiet", "busy")
BASELINE_MODES = ("seer", "hybrid", "static")  # d74d4f8 has no demo_order or latency_budget setting
#: after's pipeline: the answer-quality work's (issue 9) -- span questions extracted, the rest by a program
DEFAULT_ROUTE = "extract_compute"
NON_INFERIORITY_MARGIN = -5.0  # EM points: the lower 90 % bound of (after - baseline SEER) must not be below
#: for ``plan``'s estimate (1.5B, 2 cores): mean new (not reused) prompt tokens per question, counted LM-free by
#: benchmarks/prefix_reuse.py over dev_tune (docs/throughput.md): the baseline answers in the split's order with
#: static / hybrid re-sorted per query; after in the bench's order with the fixed orders
NEW_TOKENS = {("baseline", "seer"): 1232, ("baseline", "hybrid"): 998, ("baseline", "static"): 786,
              ("after", "seer"): 1022, ("after", "seer-canonical"): 914, ("after", "hybrid"): 710,
              ("after", "hybrid-canonical"): 675, ("after", "static"): 219,
              # the first 100 questions, latency budgets priced with the 2026-11-26 rates (prefix_reuse.py --limit 100
              # --latency-budgets ...): 1.80 and 2.10 demos per question
              ("after", "seer-latency16"): 544, ("after", "hybrid-latency10"): 183}
#: measured (prefill, decode) tokens per second of the 1.5B on the idle 2 cores (docs/llm.md "Threads"): after's
#: waits (short spin, decode threads from the load; 2026-11-26) quiet and beside one busy-loop, then OpenMP's own
#: spinning waits (2026-11-23), the baseline's
ASSUMED_RATES = {"quiet": (65.0, 21.4), "busy": (33.8, 13.7),
                 "quiet-spinning": (75.2, 27.7), "busy-spinning": (45.3, 8.7)}
CALL_OVERHEAD_S, OUTPUT_TOKENS, OTHER_S = 0.06, 60, 0.5  # per question: a call's fixed cost, its reply, the rest
STARTUP_S = 30  # per cell and round: a bench process's imports, loading the model, reloading the program


def assumed_seconds(cell: Cell) -> float:
    """A rough LM time per question for ``plan`` (one call, no repair); measure, do not trust it."""
    variant = "after" if cell.variant.startswith("after") else "baseline"
    new = NEW_TOKENS.get((variant, cell.mode), NEW_TOKENS[(variant, base_mode(cell.mode))])
    spinning = cell.variant in ("baseline", "after-omp-active")
    prefill, decode = ASSUMED_RATES[f"{cell.load}-spinning" if spinning else cell.load]
    return CALL_OVERHEAD_S + new / prefill + OUTPUT_TOKENS / decode + OTHER_S


@dataclass(frozen=True)
class Cell:
    variant: str
    mode: str
    load: str

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.mode}-{self.load}"


def valid_mode(mode: str) -> bool:
    """A known mode, or ``seer|hybrid-latency<S>`` with S > 0 written as ``f"{S:g}"`` (one name per budget)."""
    match = LATENCY_MODE.match(mode)
    return mode in MODES or (match is not None and float(match.group(2)) > 0
                             and f"{float(match.group(2)):g}" == match.group(2))


def base_mode(mode: str) -> str:
    """The selector a mode runs: ``seer``, ``hybrid`` or ``static``."""
    return mode.split("-")[0]


def latency_budget_of(mode: str) -> float | None:
    match = LATENCY_MODE.match(mode) if valid_mode(mode) else None
    return float(match.group(2)) if match else None


def split_variant(text: str) -> tuple[str, str] | None:
    """``VARIANT-REST`` as (variant, rest), the longest variant that prefixes it; None when none does."""
    for variant in sorted(VARIANTS, key=len, reverse=True):
        if text.startswith(variant + "-"):
            return variant, text[len(variant) + 1:]
    return None


def parse_cell(name: str) -> Cell | None:
    """The cell a results directory's name stands for (None: not one of this script's)."""
    split = split_variant(name)
    if split is None:
        return None
    mode, _, load = split[1].rpartition("-")
    return Cell(split[0], mode, load) if valid_mode(mode) and load in LOADS else None


def suite_text(cell: Cell, model: str, route: str = DEFAULT_ROUTE) -> str:
    """The cell's suite: the issue's comparison, valid for the baseline's RunSpec and the current one. After's
    cells answer with ``route`` (the shipping configuration: span questions extracted, the rest by a program;
    ``""``: one program-of-thought solver, as the baseline)."""
    lines = [f'name = "{cell.name}"', 'dataset = "tatqa"', 'pool_split = "dev_pool"', 'eval_split = "dev_tune"',
             'pipeline = "pot"', f'selector = "{base_mode(cell.mode)}"', "budget = 2048", "max_exemplars = 4",
             'attributes = ["modality", "answer_type"]', f'model = "{model}"']
    if cell.variant != "baseline":  # stated either way: today's default routes TAT-QA's pot pipeline
        lines.append(f'route = "{route}"')
    if cell.mode.endswith("-canonical"):
        lines.append('demo_order = "canonical"')
    if latency_budget_of(cell.mode) is not None:
        lines.append(f"latency_budget = {latency_budget_of(cell.mode):g}")
    return "\n".join(lines) + "\n"


def cells(args) -> list[Cell]:
    """Every load x mode x variant in that order, or, given ``--cells``, those variant-mode pairs on each load in
    the order given."""
    if getattr(args, "cells", None):
        return [Cell(variant, mode, load) for load in args.loads for variant, mode in args.cells]
    out = []
    for load, mode, variant in itertools.product(args.loads, args.modes, args.variants):
        if variant == "baseline" and mode not in BASELINE_MODES:
            continue
        out.append(Cell(variant, mode, load))
    return out


def parse_pair(text: str) -> tuple[str, str] | None:
    """``VARIANT-MODE`` (e.g. ``after-seer-latency16``) as (variant, mode); None when not one this script runs."""
    split = split_variant(text)
    if split and valid_mode(split[1]) and (split[0] != "baseline" or split[1] in BASELINE_MODES):
        return split
    return None


def baseline_tree(path: Path) -> Path:
    """An export of the baseline commit (``git archive``; ``knapsack_dspy/_commit.py`` records the commit)."""
    if (path / "knapsack_dspy" / "__init__.py").exists():
        return path
    path.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile() as archive:
        subprocess.run(["git", "archive", BASELINE_COMMIT], cwd=ROOT, stdout=archive, check=True)
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            tar.extractall(path, filter="data")
    return path


def rows_of(directory: Path) -> list:
    """The cell's rows (``ResultRow``), none before its first run."""
    from knapsack_dspy.bench.results.store import load_rows

    return load_rows(directory) if (directory / "predictions.jsonl").exists() else []


def calls_of(directory: Path) -> list[dict]:
    path = directory / "lm_calls.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def run_cell(cell: Cell, upto: int, args) -> int:
    directory = Path(args.out) / cell.name
    directory.mkdir(parents=True, exist_ok=True)
    suite = directory / "suite.toml"
    suite.write_text(suite_text(cell, args.model, args.route))
    tree = baseline_tree(Path(args.baseline_dir)) if cell.variant == "baseline" else ROOT
    env = dict(os.environ, PYTHONPATH=str(tree))
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KDSPY_LOCAL_THREADS", "KDSPY_LOCAL_BATCH_THREADS"):
        env.pop(name, None)  # each tree's own defaults (d74d4f8: OpenMP's waits, every core; after: _env.py's)
    if cell.variant == "after-omp-active":
        env["OMP_WAIT_POLICY"] = "ACTIVE"  # alone: OpenMP's long spin (no GOMP_SPINCOUNT is set for it)
    if args.data_dir:
        env["KDSPY_DATA_DIR"] = args.data_dir
    command = [sys.executable, str(HERE / "throughput_tap.py"), "--log",
               str(directory / "lm_calls.jsonl"), "--preload", args.model, "--", str(suite), "--out",
               str(directory), "--limit", str(upto), "--no-cache", "--quiet"]
    print(f"[{cell.name}] questions 1-{upto}", flush=True)
    with busy_loop(cell.load == "busy"):
        return subprocess.run(command, cwd=tree, env=env).returncode


def rounds(args) -> list[int]:
    """How many questions every cell has answered after each round."""
    return [*range(args.chunk, args.limit, args.chunk), args.limit]


def answered(cell: Cell, args) -> int:
    """Questions the cell has answered (a transient failure is asked again, so it does not count)."""
    return len({r.get("example_id") for r in rows_of(Path(args.out) / cell.name) if r.get("error_kind") != "transient"})


def run(args) -> int:
    failed = 0
    for upto in rounds(args):
        for cell in cells(args):
            done = answered(cell, args)
            if done >= upto:
                continue
            code = run_cell(cell, upto, args)
            if code not in (0, 2) or (code == 2 and answered(cell, args) == done):
                # 2 with progress: some questions could not be asked (recorded in rows; asked again later);
                # 2 without: the bench refused to run (its error is printed above), e.g. rows of other code
                print(f"[{cell.name}] bench exited with {code}; stopping", file=sys.stderr)
                return code or 1
            failed += code == 2
    print(report_markdown(collect(args)))
    return 2 if failed else 0


def plan(args) -> int:
    total = 0.0
    print(f"{len(rounds(args))} rounds of up to {args.chunk} questions over {len(cells(args))} cells:")
    for cell in cells(args):
        per_question = assumed_seconds(cell)
        seconds = per_question * args.limit + STARTUP_S * len(rounds(args))
        total += seconds
        print(f"  {cell.name}: {args.limit} questions, ~{seconds / 3600:.2f} h (assumed {per_question:.0f} s / "
              f"question + {STARTUP_S} s start-up per round)")
    print(f"total ~{total / 3600:.1f} hours; resumable: interrupt and rerun the same command")
    return 0


def _mean(values):
    values = [v for v in values if v is not None]
    return statistics.fmean(values) if values else None


def cell_stats(directory: Path) -> dict | None:
    rows = [r for r in rows_of(directory) if r.get("error_kind") != "transient"]
    if not rows:
        return None
    calls = [c for c in calls_of(directory) if c.get("prompt_n") is not None]
    reused = sum(c.get("cache_n") or 0 for c in calls)
    processed = sum(c.get("prompt_n") or 0 for c in calls)
    seconds = _mean([r.get("latency_s") for r in rows])
    return {"questions": len(rows), "seconds_per_question": seconds,
            "questions_per_hour": 3600 / seconds if seconds else None,
            "em": 100 * _mean([float(r.get("em") or 0) for r in rows]),
            "cache_hit_rate": 100 * reused / (reused + processed) if reused + processed else None,
            "prefill_s": sum(c.get("prompt_ms") or 0 for c in calls) / 1000 / len(rows) if calls else None,
            "decode_s": sum(c.get("predicted_ms") or 0 for c in calls) / 1000 / len(rows) if calls else None,
            "lm_s": _mean([r.get("lm_seconds") for r in rows]),
            "predicted_lm_s": _mean([r.get("predicted_latency_s") for r in rows]),
            "demos": _mean([len(r["exemplar_ids"] or []) if "exemplar_ids" in r else None for r in rows]),
            "lm_calls": len(calls), "em_by_question": {r["example_id"]: 100 * float(r.get("em") or 0) for r in rows},
            "seconds_by_question": {r["example_id"]: r["latency_s"] for r in rows if r.get("latency_s")},
            "document_by_question": {r["example_id"]: r.get("doc_id") for r in rows}}


def collect(args) -> dict:
    found = {}
    for directory in sorted(Path(args.out).glob("*-*-*")):
        stats = cell_stats(directory) if parse_cell(directory.name) else None
        if stats:
            found[directory.name] = stats
    return found


def speedup_on_shared_questions(before: dict, after: dict) -> tuple[float | None, int]:
    """``before``'s mean seconds per question over ``after``'s, on the questions both answered (cells that stopped
    at different rounds are compared on the same questions), and how many those are."""
    a, b = after["seconds_by_question"], before["seconds_by_question"]
    shared = sorted(set(a) & set(b))
    if not shared:
        return None, 0
    return statistics.fmean(b[q] for q in shared) / statistics.fmean(a[q] for q in shared), len(shared)


def comparisons(found: dict) -> list[dict]:
    """Per after-cell: speed-ups against the baseline's same mode and against baseline SEER (same load, shared
    questions), and the paired EM difference from baseline SEER with its 90 % interval, bootstrapped per
    question (the issue's test: non-inferior when its low end is >= -5) and by document (questions of one
    document resampled together, shown beside it: questions of one document are not independent)."""
    from knapsack_dspy.docqa.metrics.paired import paired_comparison

    out = []
    for name, stats in found.items():
        cell = parse_cell(name)
        if cell.variant == "baseline":
            continue
        same = found.get(Cell("baseline", base_mode(cell.mode), cell.load).name)
        seer = found.get(Cell("baseline", "seer", cell.load).name)
        row = {"cell": name, "speedup": None, "speedup_n": 0, "speedup_vs_baseline_seer": None,
               "speedup_vs_baseline_seer_n": 0, "em_vs_baseline_seer": None}
        if same:
            row["speedup"], row["speedup_n"] = speedup_on_shared_questions(same, stats)
        if seer:
            row["speedup_vs_baseline_seer"], row["speedup_vs_baseline_seer_n"] = speedup_on_shared_questions(seer,
                                                                                                             stats)
            groups = {**seer["document_by_question"],
                      **{q: d for q, d in stats["document_by_question"].items() if d is not None}}
            paired = paired_comparison(stats["em_by_question"], seer["em_by_question"], level=0.9, groups=groups)
            row["em_vs_baseline_seer"] = {"n": paired.n, "diff": paired.difference, "low": paired.low,
                                          "high": paired.high, "document_low": paired.cluster_low,
                                          "document_high": paired.cluster_high, "documents": paired.clusters,
                                          "non_inferior": bool(paired.low >= NON_INFERIORITY_MARGIN)}
        out.append(row)
    return out


def _f(value, digits=1, suffix=""):
    return "–" if value is None else f"{value:.{digits}f}{suffix}"


def report_markdown(found: dict) -> str:
    lines = ["| cell | questions | questions / hour | s / question | EM | demos / q | cache hit rate | prefill s / q "
             "| decode s / q | LM s / q | predicted LM s / q |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in found.items():
        lines.append(f"| {name} | {s['questions']} | {_f(s['questions_per_hour'])} | {_f(s['seconds_per_question'])} "
                     f"| {_f(s['em'])} | {_f(s.get('demos'), 2)} | {_f(s['cache_hit_rate'], 0, ' %')} "
                     f"| {_f(s['prefill_s'])} | {_f(s['decode_s'])} | {_f(s.get('lm_s'))} "
                     f"| {_f(s.get('predicted_lm_s'))} |")
    rows = comparisons(found)
    if rows:
        lines += ["", "| cell | speed-up vs baseline (same mode, load) | speed-up vs baseline SEER (same load) "
                  "| EM − baseline SEER [90 % CI] | by document [90 % CI] | non-inferior (≥ −5) |",
                  "|---|---|---|---|---|---|"]
        for r in rows:
            em = r["em_vs_baseline_seer"]
            shown = "–" if em is None else f"{em['diff']:+.1f} [{em['low']:+.1f}, {em['high']:+.1f}] (n={em['n']})"
            by_document = "–" if em is None or em.get("document_low") is None else (
                f"[{em['document_low']:+.1f}, {em['document_high']:+.1f}] ({em['documents']} documents)")
            verdict = "–" if em is None else ("yes" if em["non_inferior"] else "no")
            same = _f(r["speedup"], 2, "×") + (f" (n={r['speedup_n']})" if r["speedup"] else "")
            vs_seer = _f(r["speedup_vs_baseline_seer"], 2, "×") + (
                f" (n={r['speedup_vs_baseline_seer_n']})" if r["speedup_vs_baseline_seer"] else "")
            lines.append(f"| {r['cell']} | {same} | {vs_seer} | {shown} | {by_document} | {verdict} |")
        lines += ["", "Speed-ups on the questions both cells answered (n); EM differences paired on them."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("command", choices=("plan", "run", "report"))
    parser.add_argument("--limit", type=int, default=100, help="the first N dev_tune questions")
    parser.add_argument("--chunk", type=int, default=25, help="questions per round (interleaving)")
    parser.add_argument("--modes", default="seer,seer-canonical,hybrid,static")
    parser.add_argument("--variants", default="baseline,after")
    parser.add_argument("--loads", default="quiet,busy")
    parser.add_argument("--cells", default="", help="run only these VARIANT-MODE pairs, in this order within a "
                        "round (e.g. baseline-seer,after-seer-latency16); replaces --modes x --variants")
    parser.add_argument("--model", default=MODEL)
    # absolute: the baseline's benches run from its export, where a relative path would name another folder
    parser.add_argument("--out", type=lambda p: str(Path(p).resolve()),
                        default=str(HERE / "results" / "throughput"))
    parser.add_argument("--baseline-dir", type=lambda p: str(Path(p).resolve()),
                        default=str(Path(tempfile.gettempdir()) / f"kdspy-baseline-{BASELINE_COMMIT}"))
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--route", default=DEFAULT_ROUTE, choices=(DEFAULT_ROUTE, ""),
                        help="after's pipeline: extract_compute (default, the shipping one) or '' (one PoT solver)")
    parser.add_argument("--json", help="report: also write the figures here")
    args = parser.parse_args(argv)
    for name, allowed in (("modes", MODES), ("variants", VARIANTS), ("loads", LOADS)):
        values = [v.strip() for v in getattr(args, name).split(",") if v.strip()]
        unknown = sorted(v for v in set(values) - set(allowed) if not (name == "modes" and valid_mode(v)))
        if unknown or not values:
            parser.error(f"--{name}: unknown {unknown or 'empty list'}; choose from {', '.join(allowed)}"
                         + (" or seer-latency<S> / hybrid-latency<S> (S seconds)" if name == "modes" else ""))
        setattr(args, name, values)
    pairs = [v.strip() for v in args.cells.split(",") if v.strip()]
    bad = [v for v in pairs if parse_pair(v) is None]
    if bad:
        parser.error(f"--cells: {', '.join(bad)} is not VARIANT-MODE with a variant of {', '.join(VARIANTS)} and a "
                     f"mode that variant runs (the baseline: {', '.join(BASELINE_MODES)})")
    args.cells = list(dict.fromkeys(parse_pair(v) for v in pairs))  # a pair named twice runs once
    if args.limit < 1 or args.chunk < 1:
        parser.error("--limit and --chunk must be at least 1")
    if args.command == "plan":
        return plan(args)
    if args.command == "run":
        return run(args)
    found = collect(args)
    print(report_markdown(found))
    if args.json:
        Path(args.json).write_text(json.dumps({"cells": found, "comparisons": comparisons(found)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
