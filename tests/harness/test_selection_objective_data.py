"""No tuning question or document reaches what the selection-objective's selector learns from (issue 24): the gate's
suites draw their pools (what ``case_coverage``'s kind classifier is fitted on, and every exemplar) from data that
holds no question and no document of the questions they are measured on (TAT-QA ``dev_tune``; FinQA's tuning part)."""

from pathlib import Path

import pytest

from knapsack_dspy.bench.programs.run_program import load_split, without_eval_questions
from knapsack_dspy.bench.suites.suite import load_suite

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("suite_name", ["selection_objective.toml", "finqa_tune.toml"])
def test_the_gate_suites_pools_hold_no_tuning_question_or_document(suite_name):
    suite = load_suite(BENCHMARKS / suite_name)
    assert any(run.selector == "case_coverage" for run in suite.runs)
    seen = set()
    for run in suite.runs:
        key = (run.dataset, run.eval_split, run.pool_dataset, run.pool_split)
        if key in seen:
            continue
        seen.add(key)
        evalset = load_split(run, "eval", None)
        pool = load_split(run, "pool", None)
        if run.pool_dataset:  # another data set's pool: the bench drops the cases that ask an eval question
            pool = without_eval_questions(pool, evalset)
        tuning_ids = {ex.id for ex in evalset}
        tuning_docs = {ex.doc_id for ex in evalset if ex.doc_id}
        assert tuning_ids and pool
        assert not tuning_ids & {ex.id for ex in pool}
        if not run.pool_dataset:  # the cases have no documents
            assert not tuning_docs & {ex.doc_id for ex in pool}
