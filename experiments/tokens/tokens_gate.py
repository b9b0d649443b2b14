"""The tokens gate (issue 38), as pre-registered in docs/selection_objective.md ("Pre-registered: tokens"): the new
setting against today's default on TAT-QA ``dev_tune`` 163-504, with the model, paired by question and bootstrapped
by document; written before the first LM row and reading nothing but the rows.

Reads the rows of ``benchmarks/tatqa_tokens.toml`` (EM by TAT-QA's official metric; an LM failure counts as wrong,
as in the reports) and names each run by its arm:

1. ``default``: KATE within budget, full demos, budget 2,048 (today's default);
2. ``new``: ``case_coverage`` with ``token_price``, the smallest demos (``demo_table = "gold_rows"``);
3. ``greedy``: the same with ``solver = "greedy"``;
4. ``comparator``: KATE within budget on the smallest demos at its own (smaller) budget;
5. ``frozen``: ``case_coverage`` without a price, full demos (the selection-objective gate's replication);
6. ``no_demos``: on the first 171 questions.

Per arm: EM, mean prompt tokens, exemplars per prompt, prompts within budget, right answers per 1,000 prompt tokens
and seconds per question (prefill, decode, everything in the LM). A prompt two arms share is answered once (DSPy's
cache): the arm whose row was served from the cache is given the seconds of the row that asked it (the same
``prompt_sha256``). Paired differences with 90 % intervals (by question and by document): new − default (the gate),
new − comparator, new − greedy, frozen − default, and every arm − no demos on the questions no demos answered.

The gate: new − default lower 90 % bound by document >= −5 points **and** point estimate >= 0 **and** new's mean
prompt tokens <= 70 % of default's. A partial run is reported on the questions every gate arm has answered
(``--partial`` says so; the gate is decided on all 342).

    python experiments/tokens/tokens_gate.py benchmarks/results/tatqa_tokens_1p5b [--json OUT]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.analysis_command import run_analysis
from knapsack_dspy.bench.scoring.arm_figures import (
    ArmError,
    arm_figures,
    arms_table,
    difference,
    differences_table,
    figure_text,
)
from knapsack_dspy.bench.scoring.arm_figures import read_arms as read_named_arms

ARMS = ("default", "new", "greedy", "comparator", "frozen", "no_demos")
GATE_QUESTIONS = 342
LOWER_BOUND = -5.0
TOKEN_SHARE = 0.70
DIFFERENCES = (("new", "default"), ("new", "comparator"), ("new", "greedy"), ("frozen", "default"))


class GateError(ArmError):
    """The rows cannot be read as the tokens suite's arms."""


def arm_of(spec: Mapping) -> str:
    """Which pre-registered arm a run's settings are (``GateError`` for a run the suite does not have)."""
    selector = spec.get("selector")
    params = spec.get("selector_params") or {}
    small = spec.get("demo_table") == "gold_rows"
    if selector == "no_demos":
        return "no_demos"
    if selector == "kate_within_budget":
        return "comparator" if small else "default"
    if selector == "case_coverage":
        if not small:
            return "frozen"
        return "greedy" if params.get("solver") == "greedy" else "new"
    raise GateError(f"a run the tokens suite does not have: selector {selector!r}")


def read_arms(rows: Iterable) -> dict[str, dict[str, dict]]:
    """arm -> question -> {em, tokens, exemplars, within, doc, prefill, decode, lm}
    (``knapsack_dspy.bench.scoring.arm_figures.read_arms`` with this suite's arms)."""
    return read_named_arms(rows, arm_of, ARMS)


def gate_figures(arms: Mapping[str, Mapping[str, dict]]) -> dict:
    """Every figure the pre-registration names, on the questions both gate arms answered."""
    questions = sorted(set(arms["new"]) & set(arms["default"]))
    if not questions:
        raise GateError("no question both gate arms (the new setting, today's default) answered")
    out = {"questions": len(questions), "documents": len({arms["new"][q]["doc"] for q in questions}),
           "complete": len(questions) >= GATE_QUESTIONS, "arms": {}, "differences": {}, "against_no_demos": {}}
    for arm in ARMS:
        if arms[arm]:
            out["arms"][arm] = arm_figures(arms[arm], questions if arm != "no_demos" else sorted(arms[arm]))
    for a, b in DIFFERENCES:
        if arms[a] and arms[b]:
            out["differences"][f"{a} - {b}"] = difference(arms, a, b, questions)
    bare = sorted(arms["no_demos"])
    for arm in ARMS[:-1]:
        if arms[arm] and bare:
            out["against_no_demos"][arm] = difference(arms, arm, "no_demos", bare)
    gate = out["differences"]["new - default"]
    share = out["arms"]["new"]["prompt_tokens"] / out["arms"]["default"]["prompt_tokens"]
    out["gate"] = {"lower_bound": gate["cluster_low"], "difference": gate["difference"], "token_share": share,
                   "bound_met": gate["cluster_low"] is not None and gate["cluster_low"] >= LOWER_BOUND,
                   "point_met": gate["difference"] >= 0, "tokens_met": share <= TOKEN_SHARE}
    out["gate"]["passed"] = (out["complete"] and out["gate"]["bound_met"] and out["gate"]["point_met"]
                             and out["gate"]["tokens_met"])
    return out


def report(figures: Mapping) -> str:
    lines = [f"{figures['questions']} questions on {figures['documents']} documents"
             + ("" if figures["complete"] else f" (partial: the gate is decided on {GATE_QUESTIONS})"), ""]
    lines += [*arms_table(figures["arms"]), ""]
    named = {**figures["differences"], **{f"{arm} - no_demos": d for arm, d in figures["against_no_demos"].items()}}
    lines += differences_table(named)
    g = figures["gate"]
    lines += ["", f"Gate: new - default {g['difference']:+.1f} points, lower 90 % bound by document "
              f"{figure_text(g['lower_bound'], '+.1f')} (>= {LOWER_BOUND:g}: {g['bound_met']}), point estimate >= 0: "
              f"{g['point_met']}; prompt tokens {100 * g['token_share']:.1f} % of default's (<= "
              f"{100 * TOKEN_SHARE:.0f} %: {g['tokens_met']}) -> "
              + ("PASSED" if g["passed"] else "not passed" if figures["complete"] else "undecided (partial run)")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return run_analysis(argv, name="tokens_gate", description=__doc__,
                        rows_help="the rows of benchmarks/tatqa_tokens.toml",
                        figures=lambda args: gate_figures(read_arms(load_rows(args.results_dir))), report=report)


if __name__ == "__main__":
    sys.exit(main())
