"""The command line of an analysis script that reads a results directory's rows (no LM) and prints its figures:
``experiments/tokens/tokens_gate.py``, ``experiments/tokens/tokens_default.py``, ``experiments/gsm8k/gsm8k_arms.py``.

One shape for all of them: a results directory, ``--json OUT`` to also write the figures, the report on stdout, and
for bad input (the rows, the arms, the data: any :class:`~knapsack_dspy.errors.KnapsackDspyError`) one line on
stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["run_analysis"]


def run_analysis(argv: list[str] | None, *, name: str, description: str, rows_help: str,
                 figures: Callable[[argparse.Namespace], Mapping], report: Callable[[Mapping], str],
                 add_arguments: Callable[[argparse.ArgumentParser], None] | None = None) -> int:
    """Parse ``argv`` (``results_dir``, ``--json``, and what ``add_arguments`` adds), compute ``figures(args)``,
    print ``report(figures)``; 2 with a one-line message for a ``KnapsackDspyError``."""
    parser = argparse.ArgumentParser(prog=name, description=description,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results_dir", type=Path, help=rows_help)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        computed = figures(args)
    except KnapsackDspyError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    print(report(computed))
    if args.json:
        args.json.write_text(json.dumps(computed, indent=2))
    return 0
