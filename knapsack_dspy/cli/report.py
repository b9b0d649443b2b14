"""``kdspy report``: rebuild a results directory's report and write its per-question page (one HTML file)."""

from __future__ import annotations

import argparse
from pathlib import Path

from knapsack_dspy.cli.common import add_data_options, parse_list, resolve_data_dir, setup_caches
from knapsack_dspy.cli.main import UserError

EPILOG = """examples:
  kdspy report benchmarks/results/embedded_seer_kate_random
  kdspy report results/adhoc -o adhoc.html --prompts                 # every answered row's prompt, checked
  kdspy report results/adhoc --prompts 5c2817e5-db8b-...,b4aec8a2-...  # those questions' prompts

Rewrites RESULTS_DIR/metrics.json, comparisons.json, report.md and the plots with the current code (the rows in
predictions.jsonl, or in the committed predictions.jsonl.xz / .gz, are read, never changed) and writes one
self-contained HTML page (default RESULTS_DIR/page.html; no server, no network: open it from disk): the report's
tables and plots, and every question across the runs -- question, gold, each run's answer, right or wrong, the
exemplars it chose (with their questions), its program or reasoning, prompt tokens -- filterable by answer type,
by where runs disagree, by run ("right in seer, wrong in kate"). The questions' text comes from the eval split
(--data-dir). --prompts re-renders the first prompt of the rows from the compiled programs in
RESULTS_DIR/programs/ (compiling a missing one again) and checks it against
the fingerprint the row recorded; the page shows it.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("report", help="rebuild a results directory's report; write its per-question page",
                              description=__doc__, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", metavar="RESULTS_DIR", help="a results directory written by kdspy bench")
    p.add_argument("-o", "--output", metavar="PAGE", help="the HTML page to write (default RESULTS_DIR/page.html)")
    p.add_argument("--prompts", nargs="?", const="all", metavar="IDS",
                   help="re-render and check the prompts of these questions (comma-separated ids; no value: every "
                        "answered question) and show them on the page")
    p.add_argument("--quiet", action="store_true", help="no progress messages")
    add_data_options(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from knapsack_dspy.bench.reporting.results_page import ALL_QUESTIONS, ResultsPageError, write_results_page

    out = Path(args.results)
    if not out.is_dir():
        raise UserError(f"{out} is not a directory (a results directory written by kdspy bench)")
    prompts = None
    if args.prompts is not None:
        prompts = ALL_QUESTIONS if args.prompts == "all" else parse_list(args.prompts)
        if not prompts:
            raise UserError("--prompts: give question ids separated by commas, or no value for every question")
    setup_caches(args, lm=False)
    data_dir = _data_dir_or_none(args)
    log = (lambda message: None) if args.quiet else print
    try:
        outcome = write_results_page(out, args.output, data_dir=data_dir, prompts=prompts, log=log)
    except ResultsPageError as exc:
        raise UserError(str(exc)) from None
    for note in outcome.notes:
        print(f"note: {note}")
    if outcome.prompts:
        print("prompts re-rendered: " + ", ".join(f"{n} {status}" for status, n in sorted(outcome.prompts.items())))
    plots = outcome.report.plots
    print(f"report: {out / 'report.md'} ({len(outcome.report.metrics)} runs; {len(plots.written)} plots"
          + (f", {len(plots.not_drawn)} not drawn: see report.md" if plots.not_drawn else "") + ")")
    print(f"page: {outcome.page}")
    return 0


def _data_dir_or_none(args):
    """The data folder, or None when there is none: the report is still written, with questions shown by id."""
    try:
        return resolve_data_dir(args)
    except UserError as exc:
        if getattr(args, "data_dir", None):  # asked for explicitly: a wrong folder is an error
            raise
        print(f"note: {exc}; questions are shown by id only")
        return None
