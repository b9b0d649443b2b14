"""A statute text kept within a token budget, cut by the hierarchy (``retrieval.statute_budget``), through
``StatuteRetriever(max_tokens=...)``, ``StatuteQA(statute_tokens=...)`` and the suite key ``statute_tokens``: on
the real SARA statutes and cases, every prompt within the budget."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from helpers import DATA, HashingEmbedder, WordCounter

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import RunSpec, SuiteError, suite_from_dict
from knapsack_dspy.docqa.pipelines.pipeline import load_program, save_program
from knapsack_dspy.docqa.pipelines.statute_retriever import StatuteRetriever
from knapsack_dspy.docqa.retrieval.citations import extract_citations
from knapsack_dspy.docqa.retrieval.statute_budget import fit_statute_selection, statute_priority
from knapsack_dspy.docqa.retrieval.statute_corpus import StatuteCorpus
from knapsack_dspy.docqa.retrieval.statute_strategies import (
    STRATEGIES,
    StatuteSelection,
    render_subsections,
    select_statute_text,
)
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

DATA_DIR = DATA  # KDSPY_DATA_DIR, else ../shared/data beside the checkout (tests/helpers.py)
STATUTE_DIR = DATA_DIR / "sara" / "statutes"


def words(text: str) -> int:
    return len(text.split())


@pytest.fixture(scope="module")
def corpus() -> StatuteCorpus:
    if not STATUTE_DIR.is_dir():
        pytest.skip(f"SARA statutes not found in {STATUTE_DIR} (set KDSPY_DATA_DIR)")
    return StatuteCorpus.from_directory(STATUTE_DIR)


@pytest.fixture(scope="module")
def questions() -> list[str]:
    path = DATA_DIR / "sara" / "cases_train.json.gz"
    if not path.is_file():
        pytest.skip(f"SARA cases not found at {path}")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return sorted({case["question"] for case in json.load(handle)})


def test_the_cited_subsection_comes_first_then_its_descendants_siblings_and_the_rest(corpus):
    ids = corpus.sort_ids(corpus.nodes)  # every statute, as for a question that cites nothing
    order = statute_priority(corpus, ids, ["152(c)(1)"])
    first = order.index
    assert order[:3] == ["152", "152(c)", "152(c)(1)"]  # the cited node with its ancestors
    assert max(first(d) for d in ("152(c)(1)(A)", "152(c)(1)(B)")) < first("152(c)(2)")  # descendants, siblings
    assert first("152(c)(2)") < first("152(c)(3)") < first("152(a)") < first("152(d)")  # then its parent's siblings
    assert max(first(node) for node in corpus.subtree("152")) < first("1")  # then the other sections
    # nothing cited: every section's root, then each level of every section
    order = statute_priority(corpus, ids, [])
    roots = [s for s in corpus.statutes]
    assert sorted(order[: len(roots)]) == sorted(roots)
    depths = [corpus[node].depth for node in order]
    assert depths == sorted(depths)


@pytest.mark.parametrize("budget", [60, 250, 800])
def test_every_question_and_strategy_fits_and_keeps_what_matters_most(corpus, questions, budget):
    cut = 0
    for question in questions:
        for strategy in STRATEGIES:
            whole = select_statute_text(corpus, extract_citations(question), strategy)
            if not whole.cited_ids:  # a question citing nothing: every statute (StatuteRetriever "all")
                whole = StatuteRetriever(strategy, statutes=corpus, no_citation="all")(question=question)
                whole = StatuteSelection(strategy, whole.subsection_ids, whole.statute_text)
            fitted = fit_statute_selection(corpus, whole, budget, words)
            assert words(fitted.text) <= budget
            if words(whole.text) <= budget:
                assert fitted is whole and not fitted.truncated
                continue
            cut += 1
            kept, chosen = set(fitted.subsection_ids), set(whole.subsection_ids)
            assert fitted.truncated and kept <= chosen and set(fitted.dropped_ids) == chosen - kept
            assert all(corpus[n].parent in kept for n in kept if corpus[n].parent in chosen)  # no line hangs
            path = {a for c in whole.cited_ids for a in (c, *corpus.ancestors(c))} & chosen
            if words(render_subsections(corpus, path)) <= budget * 0.8:
                assert path <= kept  # the cited text and its context, whenever it fits with room to spare
    assert cut


def test_the_retriever_and_the_pipeline_cut_statutes_to_their_budget(corpus, tmp_path):
    numerical = "How much tax does Alice have to pay in 2017?"
    whole = StatuteRetriever(statutes=corpus, no_citation="all")(question=numerical)
    cut = StatuteRetriever(statutes=corpus, no_citation="all", max_tokens=500, count_tokens=words)(
        question=numerical)
    assert words(whole.statute_text) > 3000 and not whole.truncated
    assert cut.truncated and words(cut.statute_text) <= 500 and cut.statute_text.startswith("§1. Tax imposed")
    assert all(f"§{section}." in cut.statute_text for section in corpus.statutes)  # every section's title
    with pytest.raises(ValueError, match="max_tokens needs count_tokens"):
        StatuteRetriever(statutes=corpus, max_tokens=500)(question="Section 2(a) applies to Bob in 2017.")
    with pytest.raises(ValueError, match="max_tokens must be a positive number"):
        StatuteRetriever(statutes=corpus, max_tokens=0)
    program = build_pipeline("sara", "cot", retrieval="entire_section", statute_tokens=400,
                             embedder=HashingEmbedder(), token_counter=WordCounter(), data_dir=DATA_DIR)
    program.retrieve._corpus = corpus
    assert words(program.prompt_inputs({"question": numerical, "paragraphs": ["facts"]})["statute"]) <= 400
    assert program.spec.spec["statute_tokens"] == 400
    assert "statute_tokens" not in build_pipeline("sara", "cot", embedder=HashingEmbedder()).spec.spec


def test_suites_check_the_statute_budget():
    plain = suite_from_dict({"dataset": "sara", "pipeline": "cot"}).runs[0]
    assert plain.key == RunSpec(dataset="sara", pipeline="cot").key
    assert suite_from_dict({"dataset": "sara", "pipeline": "cot", "statute_tokens": 2048}).runs[0].key != plain.key
    with pytest.raises(SuiteError) as error:
        suite_from_dict({"runs": [{"dataset": "tatqa", "statute_tokens": 100},
                                  {"dataset": "sara", "pipeline": "cot", "statute_tokens": 0}]})
    assert "runs[0] statute_tokens: a statute budget is for the statute tasks (sara)" in str(error.value)
    assert "runs[1] statute_tokens: must be a positive number of tokens" in str(error.value)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_sara_prompt_is_within_the_budget_selection_only(tmp_path, corpus, strategy, monkeypatch):
    from knapsack_dspy.bench.programs import run_program
    from knapsack_dspy.docqa.data import load_examples

    cases = load_examples("sara", split="train", data_dir=DATA_DIR)
    monkeypatch.setattr(run_program, "load_split", lambda spec, which, data_dir: cases)
    suite = suite_from_dict({"name": "t", "dataset": "sara", "pool_split": "train", "eval_split": "train",
                             "pipeline": "cot", "retrieval": strategy, "selector": "kate_within_budget",
                             "max_exemplars": 2, "attributes": [], "budget": 1500, "reserve_output_tokens": 300,
                             "statute_tokens": 700})
    run_suite(suite, tmp_path, embedder=HashingEmbedder(), token_counter_factory=lambda model: WordCounter(),
              selection_only=True, progress=False, log=lambda message: None)
    rows = load_rows(tmp_path)
    assert len(rows) == 256 and all(r["within_budget"] and r["prompt_tokens"] <= 1500 - 300 for r in rows)
    assert sum(len(r["exemplar_ids"]) == 2 for r in rows) > 200
    saved = next(p for p in (tmp_path / "programs").glob("*.json") if not p.name.endswith(".report.json"))
    program = load_program(saved, embedder=HashingEmbedder(),
                           token_counter=WordCounter())
    assert program.spec.spec["statute_tokens"] == 700  # the saved program keeps its statute budget


def test_compiled_programs_without_a_budget_are_unchanged(corpus, tmp_path):
    student = build_pipeline("sara", "cot", embedder=HashingEmbedder(), token_counter=WordCounter(),
                             selector="kate", max_exemplars=1, attributes=())
    student.retrieve._corpus = corpus
    import dspy

    pool = [dspy.Example(id=f"s2_a_{i}_pos", doc_id=f"s2_a_{i}", question=f"Section 2(a) applies to Bob in 20{i}.",
                         paragraphs=["Bob is a widower."], answer="Entailment", answer_type="entailment",
                         dataset="sara").with_inputs("question") for i in range(10, 14)]
    program = KnapsackFewShot(progress=False, token_counter=WordCounter()).compile(student, trainset=pool)
    path = save_program(program, tmp_path / "p.json")
    assert "statute_tokens" not in json.loads(path.read_text())["spec"]


def test_the_table_3_suite_keeps_every_prompt_and_answer_within_the_context():
    from knapsack_dspy.bench.suites.suite import load_suite
    from knapsack_dspy.llm.local_models import DEFAULT_N_CTX
    from knapsack_dspy.selection.selectors.registry import selector_class

    suite = load_suite(Path(__file__).resolve().parents[2] / "benchmarks" / "sara_rag_cot.toml")
    assert sorted({run.retrieval for run in suite.runs}) == sorted(STRATEGIES)
    for run in suite.runs:
        assert (run.dataset, run.pipeline, run.pool_split, run.eval_split) == ("sara", "cot", "train", "train")
        assert run.statute_tokens and run.budget <= DEFAULT_N_CTX and run.reserve_output_tokens >= run.max_tokens
        assert selector_class(run.selector)().get_params().get("respect_budget", True)
