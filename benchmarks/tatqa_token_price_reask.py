"""TAT-QA under the token-price rule, re-asked (issue 50; docs/selection_objective.md, "The price from the pool"):
the rows of ``benchmarks/tatqa_token_price_reask.toml`` read as two arms, on the tokens gate's questions whose
selection the rule's price changes (116 of 342). No LM.

Arms: ``constant`` (``case_coverage`` at ``token_price = 0.004`` on the smallest demos: the tokens run's arm (2),
the default's price) and ``rule`` (the same with ``token_price = "auto"``: the price the frozen rule reads from the
pool). Per arm: EM (TAT-QA's official metric; a failed reply counts as wrong), mean prompt tokens, exemplars, prompts
within the budget, right per 1,000 prompt tokens, seconds; ``rule − constant`` paired, 90 % by question and by
document; the rows that failed per arm (the reply or its program; counted wrong). A partial run is reported on the
questions both arms answered.

``--tokens-run DIR`` (the tokens run, ``benchmarks/results/tatqa_tokens_1p5b``) adds two figures from its arm (2):

- **the re-ask against the first ask**: on the same questions, how often the re-asked ``constant`` arm saw the same
  prompt and gave an answer scored the same as the tokens run's (a check of what asking again changes);
- **on all of the tokens run's questions** (once every planned question is answered): its arm (2) with the
  re-asked questions' answers replaced by each arm's (the others select the same at either price), ``rule −
  constant`` paired over all of them; the seconds there are the tokens run's on the questions not re-asked.

The tokens run's arm is the run with the re-ask's settings (data set, split, demos, budget, M) at the constant.

    python benchmarks/tatqa_token_price_reask.py benchmarks/results/tatqa_token_price_reask_1p5b \\
        [--tokens-run benchmarks/results/tatqa_tokens_1p5b] [--json OUT]
"""

from __future__ import annotations

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
)
from knapsack_dspy.bench.scoring.arm_figures import read_arms as read_named_arms

ARMS = ("constant", "rule")
CONSTANT = 0.004  # the suite's price for its arm (1), as the tokens run's arm (2) recorded it (the default's today)


def arm_of(spec: Mapping) -> str:
    """The arm a run is: ``case_coverage`` priced at the constant, or at the rule's price (``ArmError`` else)."""
    params = dict(spec.get("selector_params") or {})
    if spec.get("selector") == "case_coverage" and set(params) == {"token_price"}:
        if params["token_price"] == "auto":
            return "rule"
        if params["token_price"] == CONSTANT:
            return "constant"
    raise ArmError(f"a run the suite does not have: selector {spec.get('selector')!r} {params or ''}")


#: the settings the tokens run's arm shares with the re-ask (the questions and the price aside)
SHARED_SETTINGS = ("dataset", "pipeline", "pool_split", "eval_split", "demo_table", "demo_paragraphs", "budget",
                   "max_exemplars")


def _tokens_arm(results_dir: Path, like: Mapping) -> dict[str, dict]:
    """The tokens run's arm (2) -- ``case_coverage`` at the constant with the ``SHARED_SETTINGS`` of ``like`` (the
    re-ask's spec) -- per question (``ArmError`` when the directory has no such run)."""
    rows = [row for row in load_rows(results_dir) if not row.spec.get("selection_only") and _is_constant(row.spec)
            and all(row.spec.get(key) == like.get(key) for key in SHARED_SETTINGS)]
    if not rows:
        raise ArmError(f"{results_dir}: no run of case_coverage at token_price {CONSTANT} with the re-ask's "
                       f"settings ({', '.join(SHARED_SETTINGS)})")
    return read_arms(rows)["constant"]


def _is_constant(spec: Mapping) -> bool:
    try:
        return arm_of(spec) == "constant"
    except ArmError:
        return False


def read_arms(rows) -> dict[str, dict[str, dict]]:
    """arm -> question -> its answer's figures (``arm_figures.read_arms`` with this suite's arms)."""
    return read_named_arms(rows, arm_of, ARMS)


def reask_figures(arms: Mapping[str, Mapping[str, dict]], planned: Sequence[str] | None = None,
                  first: Mapping[str, dict] | None = None) -> dict:
    """The two arms on the questions both answered: their figures, their paired difference, and per arm how many of
    those questions' rows failed; with ``first`` (the tokens run's arm (2), per question): the re-ask against the
    first ask, and, once every ``planned`` question is answered, both arms over all of ``first``'s questions.
    ``ArmError`` when a re-asked question is not among ``first``'s."""
    if not arms["constant"] or not arms["rule"]:
        raise ArmError("the rows hold no question both arms answered")
    questions = sorted(set(arms["constant"]) & set(arms["rule"]))
    out: dict = {"questions": len(questions), "planned": len(planned) if planned else None,
                 "complete": bool(planned) and set(planned or ()) <= set(questions),
                 "arms": {arm: arm_figures(arms[arm], questions) for arm in ARMS},
                 "differences": {"rule - constant": difference(arms, "rule", "constant", questions)},
                 "failed_rows": {arm: sum(arms[arm][q]["failed"] for q in questions) for arm in ARMS}}
    if first is None:
        return out
    missing = sorted(set(questions) - set(first))
    if missing:
        raise ArmError(f"{len(missing)} re-asked questions are not among the tokens run's (first: {missing[0]})")
    reasked = arms["constant"]
    same_prompt = [q for q in questions if reasked[q]["prompt"] and reasked[q]["prompt"] == first[q]["prompt"]]
    out["reask"] = {"questions": len(questions), "same_prompt": len(same_prompt),
                    "same_score": sum(reasked[q]["em"] == first[q]["em"] for q in questions),
                    "same_score_same_prompt": sum(reasked[q]["em"] == first[q]["em"] for q in same_prompt),
                    "first_em": arm_figures(first, questions)["em"],
                    "difference": difference({"reasked": reasked, "first": first}, "reasked", "first", questions)}
    if out["complete"]:  # before, the questions not yet re-asked would count as selecting the same at either price
        whole = {arm: {q: (arms[arm][q] if q in arms[arm] else first[q]) for q in first} for arm in ARMS}
        out["all_questions"] = {"questions": len(first), "reasked": len(questions),
                                "arms": {arm: arm_figures(whole[arm], sorted(first)) for arm in ARMS},
                                "difference": difference(whole, "rule", "constant", sorted(first))}
    return out


def report(figures: Mapping) -> str:
    """The figures of :func:`reask_figures` as text: the arms, the difference, the re-ask, all questions."""
    planned = figures["planned"]
    head = f"{figures['questions']} questions" + ("" if figures["complete"] else
                                                  f" (partial: the suite has {planned})" if planned else "")
    lines = [head, "", *arms_table(figures["arms"]), "", *differences_table(figures["differences"]), "",
             "Rows that failed (the reply or its program; counted wrong): " + ", ".join(
                 f"{arm} {n}" for arm, n in figures["failed_rows"].items())]
    if "reask" in figures:
        r = figures["reask"]
        d = r["difference"]
        lines += ["", f"The re-ask against the first ask (the tokens run's arm (2), {r['questions']} questions): "
                  f"the same prompt on {r['same_prompt']}, scored the same on {r['same_score']} "
                  f"({r['same_score_same_prompt']} of those with the same prompt); EM {r['first_em']:.1f} then, "
                  f"{figures['arms']['constant']['em']:.1f} now: now − then {figure_text(d['difference'], '+.1f')} "
                  f"[{figure_text(d['low'], '+.1f')}, {figure_text(d['high'], '+.1f')}] by question"]
        a = figures.get("all_questions")
        if a is None:
            lines += ["", "All of the tokens run's questions: once every planned question is answered."]
        else:
            lines += ["", f"All {a['questions']} of the tokens run's questions (the {a['reasked']} re-asked ones "
                      "answered by each arm, the others as the tokens run answered them, with its seconds):", "",
                      *arms_table(a["arms"]), "", *differences_table({"rule - constant": a["difference"]})]
    return "\n".join(lines)


def _figures(args) -> dict:
    rows = load_rows(args.results_dir)
    spec = next((r.spec for r in rows if not r.spec.get("selection_only")), None)
    planned = list(spec.get("example_ids") or ()) if spec else None
    first = _tokens_arm(args.tokens_run, spec or {}) if args.tokens_run else None
    return reask_figures(read_arms(rows), planned, first)


def _arguments(parser) -> None:
    parser.add_argument("--tokens-run", type=Path, default=None,
                        help="the tokens run's results (benchmarks/results/tatqa_tokens_1p5b): the re-ask against "
                             "its arm (2), and both arms over all its questions")


def main(argv: list[str] | None = None) -> int:
    return run_analysis(argv, name="tatqa_token_price_reask", description=__doc__,
                        rows_help="the rows of benchmarks/tatqa_token_price_reask.toml", figures=_figures,
                        report=report, add_arguments=_arguments)


if __name__ == "__main__":
    sys.exit(main())
