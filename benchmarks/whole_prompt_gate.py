"""One budget for the whole prompt (issue 49), as pre-registered in docs/results.md ("Pre-registered: whole-prompt
selection"): the four arms of ``benchmarks/whole_prompt_tatqa.toml`` (or, with ``--finqa``, of
``benchmarks/whole_prompt_finqa.toml``) read from their rows, no LM.

Arms, named by their run's settings (every arm is ``priced_case_coverage``; they differ in how the evidence is
chosen -- the spec's ``evidence_selection``, ``evidence``, ``evidence_solver`` -- and the budget):

1. ``default``: today's default, the fixed evidence rules (``evidence_selection = "rules"``), budget 2,048;
2. ``whole_prompt``: demos and pieces in one knapsack solved exactly (``evidence = "joint"``, the milp), 1,024;
3. ``whole_prompt_greedy``: the same knapsack's greedy (``evidence_solver = "greedy"``);
4. ``fair_relevance``: the fair comparator, today's demos then the pieces by relevance (``evidence = "relevance"``).

**The setting** is arm 2 or arm 3: ``--solver exact|greedy`` (no default) names the solver the solver rule's fold1
measurement picked (LM-free, recorded before the first LM row: exact only if exact - greedy gold-evidence recall has
a lower 90 % bound > 0 by document).

**The gate** (TAT-QA; EM by TAT-QA's official metric, an LM failure counted wrong; paired by question, 90 %
intervals bootstrapped by document -- ``arm_figures.difference``, as the tokens gate): the setting - ``default``
lower 90 % bound by document >= -5 points and point estimate >= 0, **and** the setting's mean prompt tokens <= 866,
**and** its mean tokens after the instructions (rows: ``tokens_after_instructions``) <= 60 % of ``default``'s. The
aim (reported): its prompt tokens <= 70 % of ``default``'s at a point >= 0. The verdict is "undecided" while any arm
has not answered every question of the run (its ``example_ids``); the figures are then those of the questions every
arm answered.

**Reported beside it**: the setting - ``fair_relevance``, ``whole_prompt`` - ``whole_prompt_greedy``; per arm EM,
prompt tokens, tokens after the instructions, demos and pieces per prompt, prompts within budget, right answers per
1,000 prompt tokens, prefill / decode / LM seconds per question; EM by gold answer type (read from the eval split:
the rows do not hold it); the instructions' sha256 compared across the arms per question (a question whose arms sent
different instructions is reported loudly: the arms must differ only in demos and evidence). Gold-evidence recall is
not in the rows (the pieces' indices, not the rows and paragraphs they are): it is the LM-free measurement's
(``benchmarks/whole_prompt_selection.py --split dev_pool_fold1``, the same questions).

``--finqa``: the same figures without the gate, and each arm's wrong answers by failure class
(``metrics.finqa_python.failure_class``: wrong cell, wrong operation, ...; the gold program read from the eval split,
the programs' numbers resolved on the document's whole table). Both check the questions against the pre-registered
sha256 (the ids sorted, joined by newlines).

    python benchmarks/whole_prompt_gate.py benchmarks/results/whole_prompt_tatqa_1p5b --solver exact|greedy
    python benchmarks/whole_prompt_gate.py benchmarks/results/whole_prompt_finqa_1p5b --finqa --solver exact|greedy
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.results.question_facts import eval_split_of
from knapsack_dspy.bench.results.row_outcomes import could_not_ask
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.scoring import arm_figures as named_arms
from knapsack_dspy.bench.scoring.analysis_command import run_analysis
from knapsack_dspy.bench.scoring.arm_figures import ArmError, figure_text

ARMS = ("default", "whole_prompt", "whole_prompt_greedy", "fair_relevance")
SETTING = {"exact": "whole_prompt", "greedy": "whole_prompt_greedy"}
#: sha256 of the pre-registered question ids, sorted and joined by newlines (docs/results.md)
QUESTIONS_SHA256 = {"tatqa": "45e76ccd8ea8ff041047bd1ab96fa1ad6f686eb2be70cdc12ca5f6d1b0de39ec",
                    "finqa": "6efe6ec5d2bd86fadef56e1e44bffc64326659b898609ea4322a57ab98b3f7a4"}
MARGIN = 5.0  # points: the lower 90 % bound by document may not fall below -MARGIN
MAX_TOKENS = 866  # mean prompt tokens: half the old default's 1,733
AFTER_SHARE = 0.60  # mean tokens after the instructions: at most this share of today's default's
AIM_SHARE = 0.70  # the aim: prompt tokens at most this share of today's default's at a point >= 0
WRONG_CLASSES = ("wrong cell", "wrong operation")


def arm_of(spec: Mapping) -> str:
    """The arm a run's settings are (``ArmError`` for a run the suite does not have)."""
    selection, evidence = spec.get("evidence_selection", "rules"), spec.get("evidence")
    if selection == "rules":
        return "default"
    if selection == "knapsack" and evidence == "relevance":
        return "fair_relevance"
    if selection == "knapsack" and evidence == "joint":
        return "whole_prompt_greedy" if spec.get("evidence_solver") == "greedy" else "whole_prompt"
    raise ArmError(f"a run the whole-prompt suite does not have: evidence_selection {selection!r}, "
                   f"evidence {evidence!r}")


def instructions_check(arms: Mapping[str, Mapping[str, dict]]) -> dict:
    """Per question the instructions' sha256 every arm's row records: the questions compared, those where the arms
    differ (``mismatched``: question -> arm -> hash), the rows that record none."""
    hashes: dict[str, dict[str, str]] = {}
    unrecorded = 0
    for arm, answers in arms.items():
        for question, answer in answers.items():
            if answer.get("instructions"):
                hashes.setdefault(question, {})[arm] = answer["instructions"]
            else:
                unrecorded += 1
    compared = {q: h for q, h in hashes.items() if len(h) > 1}
    mismatched = {q: h for q, h in sorted(compared.items()) if len(set(h.values())) > 1}
    return {"compared": len(compared), "mismatched": mismatched, "unrecorded": unrecorded}


def by_answer_type(arms: Mapping[str, Mapping[str, dict]], questions: Sequence[str],
                   answer_types: Mapping[str, str]) -> dict[str, dict[str, dict]]:
    """gold answer type -> arm -> {n, em} on ``questions`` (those whose type is known)."""
    out: dict[str, dict[str, dict]] = {}
    for kind in sorted({answer_types[q] for q in questions if q in answer_types}):
        own = [q for q in questions if answer_types.get(q) == kind]
        out[kind] = {arm: {"n": len(own), "em": named_arms.arm_figures(answers, own)["em"]}
                     for arm, answers in arms.items() if answers}
    return out


def failure_counts(rows: Iterable, examples: Mapping[str, Mapping]) -> dict[str, dict[str, int]]:
    """FinQA: arm -> failure class -> wrong answers (``metrics.finqa_python.failure_class``, the document's whole
    table); ``"could not ask"``: rows the LM never answered."""
    from knapsack_dspy.docqa.metrics.finqa_python import failure_class

    out: dict[str, Counter] = {}
    for row in rows:
        tally = out.setdefault(arm_of(row.spec), Counter())
        if row.correct or row.example_id not in examples:
            continue
        if could_not_ask(row):
            tally["could not ask"] += 1
            continue
        example = examples[row.example_id]
        kind = failure_class(row.answer, example.get("answer"), program=row.output or "",
                             gold_program=example.get("program") or "", table=example.get("table"))
        tally[kind or "right value judged wrong"] += 1
    return {arm: dict(counts) for arm, counts in out.items()}


def gate_figures(arms: Mapping[str, Mapping[str, dict]], planned: Sequence[str], *, solver: str,
                 dataset: str = "tatqa", examples: Mapping[str, Mapping] | None = None, rows: Iterable = ()) -> dict:
    """Every figure the pre-registration names, on the questions every arm with rows answered: ``arms`` as
    ``read_arms`` reads them, ``planned`` the run's questions, ``examples`` the eval split's by id (their gold
    answer types; FinQA: the wrong answers of ``rows`` by failure class); the gate for TAT-QA, none for FinQA."""
    setting = SETTING[solver]
    if not arms["default"] or not arms[setting]:
        raise ArmError(f"the rows hold no question both today's default and {setting} answered")
    questions = sorted(set.intersection(*(set(a) for a in arms.values() if a)))
    complete = bool(planned) and all(set(planned) <= set(arms[arm]) for arm in ARMS)
    types = {q: str(ex.get("answer_type")) for q, ex in (examples or {}).items() if ex.get("answer_type")}
    shared = set(questions)
    failures = (failure_counts([r for r in rows if r.example_id in shared], examples)
                if dataset == "finqa" and examples is not None else None)
    out: dict = {"dataset": dataset, "setting": setting, "questions": len(questions), "planned": len(planned),
                 "documents": len({arms[setting][q]["doc"] for q in questions}), "complete": complete,
                 "preregistered": hashlib.sha256("\n".join(sorted(planned)).encode()).hexdigest()
                 == QUESTIONS_SHA256.get(dataset),
                 "arms": {arm: named_arms.arm_figures(arms[arm], questions) for arm in ARMS if arms[arm]},
                 "differences": {}, "instructions": instructions_check(arms),
                 "by_answer_type": by_answer_type(arms, questions, types) if types else None,
                 "failures": failures}
    other = SETTING["greedy" if solver == "exact" else "exact"]
    for a, b in ((setting, "default"), (setting, "fair_relevance"), ("whole_prompt", "whole_prompt_greedy"),
                 (other, "default"), ("fair_relevance", "default")):
        if arms[a] and arms[b] and f"{a} - {b}" not in out["differences"]:
            out["differences"][f"{a} - {b}"] = named_arms.difference(arms, a, b, questions)
    if dataset == "tatqa":
        gain, new, today = out["differences"][f"{setting} - default"], out["arms"][setting], out["arms"]["default"]
        after = (new["tokens_after_instructions"] / today["tokens_after_instructions"]
                 if new["tokens_after_instructions"] is not None and today["tokens_after_instructions"] else None)
        g = {"difference": gain["difference"], "lower_bound": gain["cluster_low"],
             "bound_met": gain["cluster_low"] is not None and gain["cluster_low"] >= -MARGIN,
             "point_met": gain["difference"] >= 0, "prompt_tokens": new["prompt_tokens"],
             "tokens_met": new["prompt_tokens"] is not None and new["prompt_tokens"] <= MAX_TOKENS,
             "after_share": after, "after_met": after is not None and after <= AFTER_SHARE,
             "token_share": new["prompt_tokens"] / today["prompt_tokens"]}
        g["aim_met"] = g["token_share"] <= AIM_SHARE and g["point_met"]
        met = g["bound_met"] and g["point_met"] and g["tokens_met"] and g["after_met"]
        g["verdict"] = "undecided (partial run)" if not complete else "PASS" if met else "FAIL"
        out["gate"] = g
    return out


def _percent(share) -> str:
    return "–" if share is None else f"{100 * share:.1f} %"


def report(figures: Mapping) -> str:
    head = (f"{figures['dataset']}: {figures['questions']} questions every arm answered, on {figures['documents']} "
            f"documents, of the run's {figures['planned']}"
            + ("" if figures["complete"] else " (partial: an arm has not answered every question)")
            + ("; the pre-registered questions" if figures["preregistered"] else
               "; NOT the pre-registered questions") + f"; the setting: {figures['setting']}")
    arms = figures["arms"]
    lines = [head, "", *named_arms.arms_table(arms), "",
             "| arm | after the instructions | share of default's | prompt tokens, share of default's | pieces |",
             "|---|---|---|---|---|"]
    for arm, f in arms.items():
        after, today = f["tokens_after_instructions"], arms["default"]["tokens_after_instructions"]
        lines.append(f"| {arm} | {figure_text(after, '.0f')} | {_percent(after / today if after and today else None)}"
                     f" | {_percent(f['prompt_tokens'] / arms['default']['prompt_tokens'])} | "
                     f"{figure_text(f['pieces'], '.1f')} |")
    lines += ["", *named_arms.differences_table(figures["differences"]), ""]
    if figures["by_answer_type"]:
        names = list(arms)
        lines += ["EM by gold answer type:", "", "| answer type | n | " + " | ".join(names) + " |",
                  "|---|---|" + "---|" * len(names)]
        for kind, per_arm in figures["by_answer_type"].items():
            n = next(iter(per_arm.values()))["n"]
            lines.append(f"| {kind} | {n} | " + " | ".join(f"{per_arm[a]['em']:.1f}" for a in names) + " |")
    else:
        lines.append("EM by answer type: no gold answer type known (the eval split could not be read, or its "
                     "questions have none)")
    lines += ["Gold-evidence recall: not in the rows (see benchmarks/whole_prompt_selection.py on the same "
              "questions, LM-free)", ""]
    check = figures["instructions"]
    if check["mismatched"]:
        lines.append(f"!!! INSTRUCTIONS DIFFER BETWEEN ARMS on {len(check['mismatched'])} of {check['compared']} "
                     "questions: the arms must differ only in demos and evidence !!!")
        for question, hashes in list(check["mismatched"].items())[:5]:
            lines.append(f"    {question}: " + ", ".join(f"{arm} {h[:12]}" for arm, h in hashes.items()))
    else:
        lines.append(f"Instructions: the same sha256 in every arm on all {check['compared']} questions compared")
    if check["unrecorded"]:
        lines.append(f"    ({check['unrecorded']} rows record no instructions' sha256)")
    if figures["dataset"] == "finqa":
        lines += ["", *_failures_table(figures["failures"])]
    if "gate" in figures:
        g = figures["gate"]
        lines += ["", f"Gate: {figures['setting']} - default {g['difference']:+.1f} points, lower 90 % bound by "
                  f"document {figure_text(g['lower_bound'], '+.1f')} (>= -{MARGIN:g}: {g['bound_met']}), point "
                  f">= 0: {g['point_met']}; {figure_text(g['prompt_tokens'], '.0f')} mean prompt tokens (<= "
                  f"{MAX_TOKENS}: {g['tokens_met']}); tokens after the instructions {_percent(g['after_share'])} of "
                  f"default's (<= {100 * AFTER_SHARE:.0f} %: {g['after_met']}) -> {g['verdict']}",
                  f"Aim: prompt tokens {_percent(g['token_share'])} of default's (<= {100 * AIM_SHARE:.0f} % at a "
                  f"point >= 0: {g['aim_met']})"]
    return "\n".join(lines)


def _failures_table(failures: Mapping[str, Mapping[str, int]] | None) -> list[str]:
    if failures is None:
        return ["Wrong cell / wrong operation: not counted (the eval split, which holds the gold programs, could "
                "not be read)"]
    kinds = [*WRONG_CLASSES, *sorted({k for c in failures.values() for k in c} - set(WRONG_CLASSES))]
    lines = ["Wrong answers by failure class (metrics.finqa_python.failure_class, whole tables):", "",
             "| arm | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for arm, counts in failures.items():
        lines.append(f"| {arm} | " + " | ".join(str(counts.get(k, 0)) for k in kinds) + " |")
    return lines


def _examples(rows: Sequence) -> dict[str, Mapping] | None:
    """The eval split's examples by id (None when it cannot be read)."""
    from knapsack_dspy.bench.suites.chosen_questions import load_split

    try:
        return {str(ex.id): ex for ex in load_split(eval_split_of(rows[0].spec), "eval", None)}
    except (ValueError, OSError):  # DataError, ConfigError (no data folder), a missing file
        return None


def _figures(args) -> dict:
    dataset = "finqa" if args.finqa else "tatqa"
    rows = [row for row in load_rows(args.results_dir) if not row.spec.get("selection_only")]
    other = {row.spec.get("dataset") for row in rows} - {dataset}
    if not rows or other:
        raise ArmError(f"expected {dataset} LM rows in {args.results_dir}, found "
                       f"{', '.join(sorted(map(str, other))) or 'none'}" + ("" if args.finqa else " (FinQA: --finqa)"))
    arms = named_arms.read_arms(rows, arm_of, ARMS)
    planned = list(next(r.spec for r in rows if arm_of(r.spec) == "default").get("example_ids") or ()) \
        if arms["default"] else []
    return gate_figures(arms, planned, solver=args.solver, dataset=dataset, examples=_examples(rows), rows=rows)


def _arguments(parser) -> None:
    parser.add_argument("--solver", choices=sorted(SETTING), required=True,
                        help="the setting's evidence solver: what the solver rule's fold1 measurement picked")
    parser.add_argument("--finqa", action="store_true", help="the FinQA rows: the same figures, no gate")


def main(argv: list[str] | None = None) -> int:
    return run_analysis(argv, name="whole_prompt_gate", description=__doc__, add_arguments=_arguments,
                        rows_help="the rows of benchmarks/whole_prompt_tatqa.toml (--finqa: whole_prompt_finqa.toml)",
                        figures=_figures, report=report)


if __name__ == "__main__":
    sys.exit(main())
