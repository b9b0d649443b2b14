"""SARA exemplars leave one group out: the _pos / _neg twins of a subsection (near-identical facts, the opposite
label) share a group (their doc_id), so a case's twin is never its demo; a numerical case is its own group."""

from __future__ import annotations

import pytest
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.data.sara import case_group, parse_sara_case
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.paths import ConfigError, data_dir
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot


def test_twins_share_a_group_and_numerical_cases_have_their_own():
    assert case_group("s152_c_1_B_pos") == case_group("s152_c_1_B_neg") == "s152_c_1_B"
    assert case_group("s152_c_1_pos") == "s152_c_1" != case_group("s152_c_1_B_pos")
    assert case_group("tax_case_12") == "tax_case_12" and case_group("s2_pos_x") == "s2_pos_x"
    case = {"id": "s7703_a_1_neg", "text": "facts", "question": "Section 7703(a)(1) applies.", "type": "entailment",
            "label": "Contradiction"}
    fields = parse_sara_case(case)[0]
    assert (fields["id"], fields["doc_id"], fields["extra"]["polarity"]) == ("s7703_a_1_neg", "s7703_a_1", "neg")


try:
    DATA = data_dir()
except ConfigError:
    DATA = None


@pytest.mark.skipif(DATA is None or not (DATA / "sara" / "cases_train.json.gz").is_file(),
                    reason="SARA train cases not available (set KDSPY_DATA_DIR)")
@pytest.mark.parametrize("selector", ["kate", "seer"])
def test_no_selection_for_a_sara_case_includes_its_twin(selector):
    cases = load_examples("sara", split="train")
    groups = {}
    for case in cases:
        groups.setdefault(case_group(case.id), []).append(case.id)
    assert (len(cases), len(groups)) == (256, 168)
    assert sorted(map(len, groups.values())).count(2) == 88
    student = build_pipeline("sara", "cot", retrieval="mentioned_only", embedder=HashingEmbedder(),
                             token_counter=WordCounter(), selector=selector, max_exemplars=4, attributes=(),
                             budget=100_000)
    program = KnapsackFewShot(progress=False, token_counter=student.token_counter).compile(student, trainset=cases)
    twins_nearest = 0
    pool = program.select.pool()
    for case in cases:
        chosen = program.select_for(case)["ids"]
        assert len(chosen) == 4
        group = groups[case_group(case.id)]
        assert not set(chosen) & set(group), (case.id, chosen)  # neither itself nor its twin
        twin = [other for other in group if other != case.id]
        if twin:  # without the exclusion the twin (same question wording) would often be the nearest case
            sims = pool.similarities(program.select.embedder.encode([case.question])[0])
            ranked = [pool.ids[i] for i in sims.argsort()[::-1] if pool.ids[i] != case.id]
            twins_nearest += ranked[0] == twin[0]
    assert twins_nearest > 40
