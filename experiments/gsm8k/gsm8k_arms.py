"""GSM8K with ChainOfThought (issue 39), as pre-registered in docs/gsm8k.md ("Pre-registration"): every arm of
``benchmarks/gsm8k_cot.toml`` against the named comparator, ``KNNFewShot(k=8)``, on the questions both answered;
reading nothing but the rows (no LM).

Arms, named by their selector: ``case_coverage`` (KnapsackFewShot, kinds derived from the pool, budget 1,536),
``dspy_knn`` (KNNFewShot(k=8), the comparator), ``dspy_labeled`` (LabeledFewShot(k=8)), ``no_demos``. Per arm:
accuracy (GSM8K's metric: the final number), mean prompt tokens, exemplars per prompt, prompts within the budget,
right answers per 1,000 prompt tokens, prefill / decode / LM seconds per question (a prompt two arms share is
answered once: the arm the cache served is given the seconds of the row that asked it). Paired differences, every
arm − ``dspy_knn``, 90 % intervals (a question is its own document here: both intervals are by question).

The aim: ``case_coverage`` − ``dspy_knn`` >= +3 points at mean prompt tokens <= KNNFewShot's. The questions are
checked against the pre-registered 100 (the sha256 of their ids in the run's order); a partial run is reported on
the questions every arm has answered and marked undecided.

    python experiments/gsm8k/gsm8k_arms.py benchmarks/results/gsm8k_cot_1p5b [--json OUT]
"""

from __future__ import annotations

import hashlib
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
    read_arms,
)
from knapsack_dspy.bench.scoring.question_range import questions_in_order

ARMS = ("case_coverage", "dspy_knn", "dspy_labeled", "no_demos")
COMPARATOR = "dspy_knn"
QUESTIONS = 100
#: sha256 of the pre-registered 100 question ids in the run's order, one per line (docs/gsm8k.md)
QUESTIONS_SHA256 = "cbc03752216a0730b37a60702749b88eecfe59a6c05aee0b82b4fd16511a824f"
AIM_POINTS = 3.0


def arm_of(spec: Mapping) -> str:
    """The arm a run is: its selector (``ArmError`` for one the suite does not have)."""
    selector = spec.get("selector")
    if selector not in ARMS:
        raise ArmError(f"a run the GSM8K suite does not have: selector {selector!r}")
    return selector


def planned_questions(spec: Mapping, data_dir=None) -> list[str]:
    """The ids of the run's first ``QUESTIONS`` questions in the order the runner asks them."""
    return questions_in_order(spec, data_dir)[:QUESTIONS]


def ids_sha256(ids: Sequence[str]) -> str:
    """sha256 of the ids one per line (joined by newlines, none after the last), as docs/gsm8k.md states it."""
    return hashlib.sha256("\n".join(ids).encode()).hexdigest()


def comparison_figures(arms: Mapping[str, Mapping[str, dict]], planned: Sequence[str] | None = None) -> dict:
    """Every figure the pre-registration names, on the questions every arm with rows answered."""
    answered = [set(answers) for answers in arms.values() if answers]
    if not arms[COMPARATOR] or not arms["case_coverage"]:
        raise ArmError("the rows hold no question both case_coverage and the comparator (dspy_knn) answered")
    questions = sorted(set.intersection(*answered))
    if not questions:
        raise ArmError("no question every arm with rows has answered: nothing to compare yet")
    out = {"questions": len(questions), "complete": len(questions) >= QUESTIONS, "arms": {}, "differences": {}}
    if planned is not None:
        out["planned_sha256"] = ids_sha256(planned)
        out["preregistered"] = out["planned_sha256"] == QUESTIONS_SHA256 and set(questions) <= set(planned)
    for arm in ARMS:
        if arms[arm]:
            out["arms"][arm] = arm_figures(arms[arm], questions)
    for arm in ARMS:
        if arm != COMPARATOR and arms[arm]:
            out["differences"][f"{arm} - {COMPARATOR}"] = difference(arms, arm, COMPARATOR, questions)
    gain = out["differences"][f"case_coverage - {COMPARATOR}"]
    ours, theirs = out["arms"]["case_coverage"]["prompt_tokens"], out["arms"][COMPARATOR]["prompt_tokens"]
    out["aim"] = {"difference": gain["difference"], "points_met": gain["difference"] >= AIM_POINTS,
                  "token_share": ours / theirs if ours is not None and theirs else None,
                  "tokens_met": ours is not None and theirs is not None and ours <= theirs}
    out["aim"]["met"] = out["complete"] and out["aim"]["points_met"] and out["aim"]["tokens_met"]
    return out


def report(figures: Mapping) -> str:
    head = f"{figures['questions']} questions" + ("" if figures["complete"] else
                                                   f" (partial: the comparison is decided on {QUESTIONS})")
    if "preregistered" in figures:
        head += ("; the pre-registered questions" if figures["preregistered"] else
                 f"; NOT the pre-registered questions (sha256 {figures['planned_sha256'][:12]})")
    lines = [head, "", *arms_table(figures["arms"], score="accuracy"), ""]
    lines += differences_table(figures["differences"])
    a = figures["aim"]
    share = "–" if a["token_share"] is None else f"{100 * a['token_share']:.1f} %"
    lines += ["", f"Aim: case_coverage - {COMPARATOR} {a['difference']:+.1f} points (>= +{AIM_POINTS:g}: "
              f"{a['points_met']}) at {share} of its prompt tokens (<= 100 %: {a['tokens_met']}) -> "
              + ("met" if a["met"] else "not met" if figures["complete"] else "undecided (partial run)")]
    return "\n".join(lines)


def _figures(args) -> dict:
    rows = load_rows(args.results_dir)
    arms = read_arms(rows, arm_of, ARMS)
    spec = next((r.spec for r in rows if not r.spec.get("selection_only")), None)
    return comparison_figures(arms, planned_questions(spec, args.data_dir) if spec is not None else None)


def main(argv: list[str] | None = None) -> int:
    # bad input -- the rows, the arms, the data (ResultsFileError, ArmError, DataError) -- exits 2 with one line
    return run_analysis(argv, name="gsm8k_arms", description=__doc__, rows_help="the rows of benchmarks/gsm8k_cot.toml",
                        figures=_figures, report=report, add_arguments=lambda parser: parser.add_argument(
                            "--data-dir", type=Path, default=None, help="the data (default: $KDSPY_DATA_DIR)"))


if __name__ == "__main__":
    sys.exit(main())
