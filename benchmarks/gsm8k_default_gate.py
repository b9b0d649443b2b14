"""A default that fits any DSPy program (issue 50), as pre-registered in docs/gsm8k.md ("Pre-registration: the price
from the pool"): the arms of ``benchmarks/gsm8k_default.toml`` on GSM8K tune questions 101-400 (seed 39's order),
against the named comparator ``LabeledFewShot(k=8)``; reading nothing but the rows and the compile reports (no LM).

Arms, named by their run: ``auto`` (priced_case_coverage, token_price "auto": the new default), ``dspy_labeled``
(LabeledFewShot(k=8), the comparator), ``case_coverage`` (unpriced), ``dspy_bootstrap`` (BootstrapFewShot, 4 + 4),
``no_demos`` (the first 100). Per arm: accuracy, mean prompt tokens, exemplars, prompts within the budget, right per
1,000 prompt tokens, prefill / decode / LM seconds per question, replies that failed to parse (counted wrong), and the
optimizer's compile cost (LM calls, seconds; from ``programs/*.report.json``). Paired differences, every arm − the
comparator, 90 % by question.

The gate: ``auto`` − ``dspy_labeled`` lower 90 % bound (by question) >= −5 and point >= 0, at mean prompt tokens
<= 943 (60 % of the comparator's 1,571 in issue 39's run), every prompt within the budget. The questions are checked
against the pre-registered 300 (sha256 of their ids in the run's order); a partial run is reported on the questions
every arm has answered and marked undecided.

    python benchmarks/gsm8k_default_gate.py benchmarks/results/gsm8k_default_1p5b [--json OUT]
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring.analysis_command import run_analysis
from knapsack_dspy.bench.scoring.arm_figures import (
    ArmError,
    arm_figures,
    arms_table,
    difference,
    differences_table,
    figure_text,
    read_arms,
)

ARMS = ("auto", "dspy_labeled", "case_coverage", "dspy_bootstrap", "no_demos")
COMPARATOR = "dspy_labeled"
QUESTIONS = 300
#: sha256 of the pre-registered 300 question ids in the run's order, joined by newlines (docs/gsm8k.md)
QUESTIONS_SHA256 = "7c1c2ae564143bb01e5b2c6656b062e7490c1f2461b011efea0627852e16d4dc"
MARGIN = 5.0  # points: the lower 90 % bound may not fall below -MARGIN
MAX_TOKENS = 943  # mean prompt tokens: 60 % of LabeledFewShot(k=8)'s 1,571 in issue 39's run


def arm_of(spec: Mapping) -> str:
    """The arm a run is (``ArmError`` for one the suite does not have)."""
    selector = spec.get("selector")
    if selector == "priced_case_coverage" and (spec.get("selector_params") or {}).get("token_price") == "auto":
        return "auto"
    if selector in ARMS and selector != "auto":
        return selector
    raise ArmError(f"a run the suite does not have: selector {selector!r} {spec.get('selector_params') or ''}")


def ids_sha256(ids: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def compile_costs(results_dir: Path) -> dict[str, dict]:
    """arm -> the compile's cost (LM calls, seconds) from the programs' reports beside the rows."""
    out: dict[str, dict] = {}
    for path in sorted((Path(results_dir) / "programs").glob("*.report.json")):
        report = json.loads(path.read_text())
        spec = {"selector": report.get("baseline") or report.get("selector"),
                "selector_params": (report.get("chosen") or {}).get("selector_params")}
        cost = report.get("cost") or (report.get("compile") or {}).get("cost") or {}
        for arm in ARMS:
            if spec["selector"] == arm or (arm == "auto" and spec["selector"] == "priced_case_coverage"):
                out[arm] = {"lm_calls": cost.get("lm_calls"), "seconds": cost.get("seconds")}
    return out


def gate_figures(arms: Mapping[str, Mapping[str, dict]], failures: Mapping[str, int],
                 planned: Sequence[str] | None = None, costs: Mapping[str, dict] | None = None) -> dict:
    """Every figure the pre-registration names, on the questions every arm with rows (no demos aside) answered."""
    if not arms["auto"] or not arms[COMPARATOR]:
        raise ArmError("the rows hold no question both the new default and the comparator answered")
    full = [set(a) for name, a in arms.items() if a and name != "no_demos"]
    questions = sorted(set.intersection(*full))
    out: dict = {"questions": len(questions), "complete": len(questions) >= QUESTIONS, "arms": {},
                 "differences": {}, "format_failures": dict(failures), "compile_cost": dict(costs or {})}
    if planned is not None:
        out["preregistered"] = ids_sha256(list(planned)) == QUESTIONS_SHA256 and set(questions) <= set(planned)
    for arm in ARMS:
        if arms[arm]:
            own = [q for q in questions if q in arms[arm]]
            out["arms"][arm] = arm_figures(arms[arm], own)
            if arm != COMPARATOR:
                out["differences"][f"{arm} - {COMPARATOR}"] = difference(arms, arm, COMPARATOR, own)
    gain = out["differences"][f"auto - {COMPARATOR}"]
    new = out["arms"]["auto"]
    out["gate"] = {"difference": gain["difference"], "low": gain["low"],
                   "accuracy_met": gain["difference"] >= 0 and gain["low"] is not None and gain["low"] >= -MARGIN,
                   "prompt_tokens": new["prompt_tokens"],
                   "tokens_met": new["prompt_tokens"] is not None and new["prompt_tokens"] <= MAX_TOKENS,
                   "within_met": new["within_budget"] >= 100.0}
    g = out["gate"]
    g["passed"] = out["complete"] and g["accuracy_met"] and g["tokens_met"] and g["within_met"]
    return out


def report(figures: Mapping) -> str:
    head = f"{figures['questions']} questions" + ("" if figures["complete"] else
                                                   f" (partial: the gate is decided on {QUESTIONS})")
    if "preregistered" in figures:
        head += "; the pre-registered questions" if figures["preregistered"] else "; NOT the pre-registered questions"
    lines = [head, "", *arms_table(figures["arms"], score="accuracy"), "", *differences_table(figures["differences"]),
             "", "| arm | replies that failed to parse | compile LM calls | compile seconds |", "|---|---|---|---|"]
    for arm in figures["arms"]:
        cost = figures["compile_cost"].get(arm, {})
        lines.append(f"| {arm} | {figures['format_failures'].get(arm, 0)} | "
                     f"{figure_text(cost.get('lm_calls'), 'd')} | {figure_text(cost.get('seconds'), '.1f')} |")
    g = figures["gate"]
    verdict = "PASSED" if g["passed"] else "not passed" if figures["complete"] else "undecided (partial run)"
    lines += ["", f"Gate: auto - {COMPARATOR} {g['difference']:+.1f} points, lower 90 % bound "
              f"{figure_text(g['low'], '+.1f')} (>= -{MARGIN:g} and point >= 0: {g['accuracy_met']}); "
              f"{figure_text(g['prompt_tokens'], '.0f')} mean prompt tokens (<= {MAX_TOKENS}: {g['tokens_met']}); "
              f"every prompt within the budget: {g['within_met']} -> {verdict}"]
    return "\n".join(lines)


def _figures(args) -> dict:
    rows = load_rows(args.results_dir)
    arms = read_arms(rows, arm_of, ARMS)
    failures: dict[str, int] = {}
    for row in rows:
        if not row.spec.get("selection_only") and row.error:
            arm = arm_of(row.spec)
            failures[arm] = failures.get(arm, 0) + 1
    spec = next((r.spec for r in rows if arm_of(r.spec) == "auto"), None)
    planned = list(spec.get("example_ids") or ()) if spec else None
    return gate_figures(arms, failures, planned, compile_costs(args.results_dir))


def main(argv: list[str] | None = None) -> int:
    return run_analysis(argv, name="gsm8k_default_gate", description=__doc__,
                        rows_help="the rows of benchmarks/gsm8k_default.toml", figures=_figures, report=report)


if __name__ == "__main__":
    sys.exit(main())
