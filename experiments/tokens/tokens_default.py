"""Issue 38, item 5: which setting of the tokens suite the evidence makes the default -- the fewest-token arm that
is non-inferior to the most accurate one (docs/selection_objective.md, "The default follows the evidence").

Reads the rows of ``benchmarks/tatqa_tokens.toml`` with the tokens gate's arms (``experiments/tokens/tokens_gate.py``), no
LM. The most accurate arm is the one right most often (EM, TAT-QA's official metric) on the questions every full
arm answered; an arm is non-inferior to it when the lower 90 % bound by document of (arm − most accurate) is at
least −5 points, the gate's margin (no demos, asked on the first 171 questions only, is compared on those); of the
non-inferior arms the one with the fewest mean prompt tokens is chosen. A partial run is reported and marked so.

    python experiments/tokens/tokens_default.py benchmarks/results/tatqa_tokens_1p5b [--json OUT]
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.analysis_command import run_analysis
from knapsack_dspy.bench.scoring.arm_figures import ArmError, fewest_tokens_non_inferior, figure_text

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tokens_gate import ARMS, GATE_QUESTIONS, LOWER_BOUND, read_arms  # the gate's own arm names


def default_choice(arms: Mapping[str, Mapping[str, dict]]) -> dict:
    """The choice on the questions every arm but no demos answered (``complete`` when that is all 342)."""
    full = [arm for arm in ARMS if arm != "no_demos" and arms[arm]]
    if not full:
        raise ArmError("no run of the tokens suite in these rows")
    questions = sorted(set.intersection(*(set(arms[arm]) for arm in full)))
    if not questions:
        raise ArmError("no question every arm answered")
    out = fewest_tokens_non_inferior(arms, questions, margin=-LOWER_BOUND, order=ARMS)
    out["questions"] = len(questions)
    out["complete"] = len(questions) >= GATE_QUESTIONS
    return out


def report(choice: Mapping) -> str:
    lines = [f"{choice['questions']} questions every arm answered"
             + ("" if choice["complete"] else f" (partial: decided on {GATE_QUESTIONS})"), "",
             f"| arm | n | EM | prompt tokens | − {choice['most_accurate']} | lower 90 % bound by document | "
             f"non-inferior (>= −{choice['margin']:g}) |", "|---|---|---|---|---|---|---|"]
    for arm, f in choice["arms"].items():
        lines.append(f"| {arm} | {f['n']} | {f['em']:.1f} | {figure_text(f['prompt_tokens'], ',.0f')} | "
                     f"{f['difference']:+.1f} | {figure_text(f['lower_bound'], '+.1f')} | "
                     f"{'yes' if f['non_inferior'] else 'no'} |")
    verdict = "the default" if choice["complete"] else "the default if the complete run agrees"
    lines += ["", f"Most accurate: {choice['most_accurate']}; fewest tokens of the non-inferior arms: "
              f"{choice['chosen']} -> {verdict}"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_analysis(argv, name="tokens_default", description=__doc__,
                        rows_help="the rows of benchmarks/tatqa_tokens.toml",
                        figures=lambda args: default_choice(read_arms(load_rows(args.results_dir))), report=report)


if __name__ == "__main__":
    sys.exit(main())
