"""``kdspy report``: rebuild a results directory's report with the current code and write its per-question page.

Under the directory's lock (``results_lock``: not while a bench writes it), it reads ``predictions.jsonl`` (or the
committed ``predictions.jsonl.xz`` / ``.gz``, ``results_store.load_rows``), reads
the rows' questions from their eval splits (``question_facts``), rewrites ``metrics.json``, ``comparisons.json``,
the plots and ``report.md`` (``bench.reporting.report``), looks up the exemplars the rows name (``exemplar_index``),
and, when asked (``prompts``), re-renders the first prompt of the chosen questions' rows from the compiled programs
in ``<dir>/programs/`` (a missing program is compiled again first: compiling is deterministic) and checks each
against the row's fingerprint (``prompt_rendering``). Then it writes one self-contained HTML page
(``page_data`` + ``html_report``). The rows are read, never changed (a torn last line is left out).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from knapsack_dspy.bench.programs import run_program
from knapsack_dspy.bench.reporting.exemplar_index import index_exemplars
from knapsack_dspy.bench.reporting.html_page import plot_data_uri, write_page
from knapsack_dspy.bench.reporting.page_data import build_page_data
from knapsack_dspy.bench.reporting.report import Report, token_count_note, write_report_files
from knapsack_dspy.bench.results.compressed_rows import COMPRESSED_ROWS_FILES, ROWS_FILE, compressed_files
from knapsack_dspy.bench.results.lock import results_lock
from knapsack_dspy.bench.results.prompt_rendering import PromptCheck, rerender_prompt
from knapsack_dspy.bench.results.provenance import code_provenance, describe_code
from knapsack_dspy.bench.results.question_facts import eval_split_of, load_question_facts
from knapsack_dspy.bench.results.row_schema import ResultRow
from knapsack_dspy.bench.results.store import load_rows, rows_file
from knapsack_dspy.bench.suites.suite import RunSpec
from knapsack_dspy.errors import KnapsackDspyError
from knapsack_dspy.messages import one_line

__all__ = ["ALL_QUESTIONS", "PAGE_NAME", "PageOutcome", "ResultsPageError", "write_results_page"]

PAGE_NAME = "page.html"
ALL_QUESTIONS = "all"


class ResultsPageError(KnapsackDspyError, ValueError):
    """The results directory cannot be reported (no rows, unknown question ids): one line saying so."""


@dataclass
class PageOutcome:
    """The page written, the report rebuilt, how the re-rendered prompts checked out, and what was missing."""

    page: Path
    report: Report
    prompts: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)


def _suite_name(out_dir: Path) -> str:
    try:
        return str(json.loads((out_dir / "suite.json").read_text()).get("name") or out_dir.name)
    except (OSError, ValueError, AttributeError):
        return out_dir.name


def _facts(rows: list[ResultRow], data_dir, notes: list[str]) -> dict:
    try:
        return load_question_facts(rows, lambda split: run_program.load_split(split, "eval", data_dir))
    except (ValueError, OSError) as exc:  # DataError, ConfigError (no data folder), a missing file
        notes.append(f"questions are shown by id only: their eval split could not be read ({one_line(exc, 240)})")
        return {}


def _program_for(run: str, spec: dict, out_dir: Path, data_dir, embedder, token_counter_factory, log, notes):
    """The run's compiled program: loaded from ``programs/``, or compiled again (deterministic) when missing."""
    path = run_program.saved_program_path(out_dir, run, spec)
    try:
        run_spec = RunSpec.from_dict(spec)
    except (TypeError, ValueError) as exc:
        notes.append(f"run {run}: its settings cannot be read ({one_line(exc, 200)}); prompts not re-rendered")
        return None
    if not path.is_file() and run_spec.key != run:
        notes.append(f"run {run}: its program is not in programs/ and its settings no longer give its key (the "
                     "code changed since): prompts not re-rendered")
        return None
    if not path.is_file():
        log(f"compiling the program of {run} (not in programs/; compiling is deterministic)")
    counter = token_counter_factory(run_spec.model) if token_counter_factory else None
    pool = [] if path.is_file() else run_program.load_split(run_spec, "pool", data_dir)
    valset = run_program.validation_slice(pool, run_spec) if pool else None
    program, _ = run_program.compile_program(run_spec, pool, valset, out_dir, embedder=embedder, token_counter=counter,
                                             progress=False)
    return program


def _rerender(rows: list[ResultRow], out_dir: Path, wanted: Collection[str] | str, data_dir, embedder,
              token_counter_factory, log, notes) -> dict[tuple[str, str], PromptCheck]:
    """Re-render the first prompt of the wanted questions' rows that recorded fingerprints (older rows cannot be
    checked: they are left as they are, and no program is compiled for them)."""
    answered = [r for r in rows if not r.spec.get("selection_only")]
    if wanted != ALL_QUESTIONS:
        wanted = {str(i) for i in wanted}
        unknown = wanted - {str(r.example_id) for r in answered}
        if unknown:
            raise ResultsPageError(f"--prompts: no answered rows for {len(unknown)} question id(s): "
                                   f"{', '.join(sorted(unknown)[:5])}{' ...' if len(unknown) > 5 else ''}")
        answered = [r for r in answered if str(r.example_id) in wanted]
    fingerprinted = [r for r in answered if r.prompt_sha256]
    if len(fingerprinted) < len(answered):
        notes.append(f"{len(answered) - len(fingerprinted)} of the {len(answered)} rows asked for were written before "
                     "rows fingerprinted their prompts: they cannot be re-rendered exactly (not attempted)")
    by_run: dict[str, list[ResultRow]] = {}
    for row in fingerprinted:
        by_run.setdefault(row.run, []).append(row)
    checks: dict[tuple[str, str], PromptCheck] = {}
    for run, run_rows in by_run.items():
        spec = run_rows[0].spec
        program = _program_for(run, spec, out_dir, data_dir, embedder, token_counter_factory, log, notes)
        if program is None:
            continue
        examples = {str(ex.get("id")): ex for ex in run_program.load_split(eval_split_of(spec), "eval", data_dir)}
        for row in run_rows:
            example = examples.get(str(row.example_id))
            if example is not None:
                checks[run, str(row.example_id)] = rerender_prompt(program, example, row)
    return checks


def write_results_page(out_dir, page=None, *, data_dir=None, prompts: Collection[str] | str | None = None,
                       embedder=None, token_counter_factory: Callable | None = None,
                       log: Callable[[str], None] = print) -> PageOutcome:
    """Rebuild ``out_dir``'s report and write its page (default ``out_dir/page.html``). ``prompts``: question ids
    whose rows' first prompt is re-rendered and checked (``ALL_QUESTIONS``: every answered row; None: none).
    ``embedder`` / ``token_counter_factory``: as ``run_suite``'s (the real ones by default). Raises
    ``ResultsBusyError`` while a bench writes the directory, ``ResultsPageError`` when there is nothing to show."""
    out_dir = Path(out_dir)
    path = rows_file(out_dir)  # predictions.jsonl, or the committed predictions.jsonl.xz / .gz
    if not path.is_file():
        raise ResultsPageError(f"{path} does not exist (nor {' / '.join(COMPRESSED_ROWS_FILES)}): no results to report "
                               "(kdspy bench writes them)")
    with results_lock(out_dir):
        rows = load_rows(path)  # read only (a torn last line is left out)
        if not rows:
            raise ResultsPageError(f"{path} holds no rows yet: nothing to report")
        notes: list[str] = []
        beside = compressed_files(out_dir) if path.name == ROWS_FILE else []
        if beside:
            names = " and ".join(other.name for other in beside)
            notes.append(f"the rows are read from {ROWS_FILE}; {names} beside it {'is' if len(beside) == 1 else 'are'}"
                         " not read")
        facts = _facts(rows, data_dir, notes)
        report = write_report_files(rows, out_dir, _suite_name(out_dir), facts)
        estimated = token_count_note(report.metrics)
        if estimated:
            notes.append(estimated)
        index = index_exemplars(rows, out_dir, lambda split: run_program.load_split(split, "pool", data_dir))
        notes += index.notes
        checks = (_rerender(rows, out_dir, prompts, data_dir, embedder, token_counter_factory, log, notes)
                  if prompts is not None else {})
        data = build_page_data(
            rows, report.metrics, report.tables, title=f"Benchmark results: {_suite_name(out_dir)}",
            generated=f"report built by {describe_code(code_provenance())}", facts=facts,
            exemplars=index.exemplars, exemplars_of_row=index.of_row,
            prompts={key: check.to_dict() for key, check in checks.items()},
            plots=[{"name": p.name, "src": plot_data_uri(p)} for p in report.plots.written],
            not_drawn=report.plots.not_drawn, notes=notes)
        written = write_page(Path(page) if page else out_dir / PAGE_NAME, data)
    return PageOutcome(written, report, Counter(check.status for check in checks.values()), notes)
