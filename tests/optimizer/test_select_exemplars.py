"""SelectExemplars + KnapsackFewShot on a small program of our own: costs in the real prompt format, budgets,
save/load, thread safety, the search."""

import dataclasses
import json
import re

import dspy
import numpy as np
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

import knapsack_dspy.docqa.pipelines.pool_attributes  # noqa: F401 -- declares modality (its LM question)
from knapsack_dspy.modules.compiled_programs import load_compiled
from knapsack_dspy.modules.prompt_cost import PromptCostModel
from knapsack_dspy.modules.select_exemplars import NotCompiledError, SelectExemplars
from knapsack_dspy.modules.selection_context import selection_hints, selection_log
from knapsack_dspy.selection import SelectionConfig
from knapsack_dspy.selection.selectors import DEFAULT_SELECTOR
from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError, KnapsackFewShot

TOPICS = ["revenue growth", "net income", "operating cash flow", "tax rate", "employee count",
          "dividend per share", "total assets", "gross margin"]
MODALITY = ["table", "text", "hybrid"]


class TinySig(dspy.Signature):
    """Answer the question."""

    context: str = dspy.InputField()
    question: str = dspy.InputField()
    answer: str = dspy.OutputField()


class TinyQA(dspy.Module):
    """A one-predictor program; it tells selection the question's id and document (no leakage) and reports what
    was selected. ``settings``: its selection settings (the ``selection_config`` compile hook)."""

    def __init__(self, **settings):
        super().__init__()
        self.answer = dspy.Predict(TinySig)
        self.settings = settings

    def selection_config(self, predictor_name):
        return SelectionConfig(embed_fields=("question",), **{"attributes": ("modality",), **self.settings})

    def forward(self, question, context, id=None, doc_id=None, **attributes):
        with selection_hints(id=id, doc_id=doc_id, attributes=attributes), selection_log() as log:
            pred = self.answer(context=context, question=question)
        return dspy.Prediction(answer=pred.answer, demo_ids=log[0].info["ids"], selection=log[0].info)


def make_examples(n, seed=0, prefix="ex"):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        words = " ".join(["filler"] * int(rng.integers(5, 120)))  # varied token costs
        ex = dspy.Example(id=f"{prefix}{i}", doc_id=f"{prefix}doc{i // 3}",
                          question=f"What was the {topic} in {2000 + i}?",
                          context=f"{topic} table {words}", answer=str(i), modality=MODALITY[i % 3],
                          answer_type="arithmetic" if i % 2 else "span")
        out.append(ex.with_inputs("question", "context", "id", "doc_id"))
    return out


@pytest.fixture(scope="module")
def embedder():
    return HashingEmbedder()


@pytest.fixture(scope="module")
def counter():
    return WordCounter()


def compile_tiny(embedder, counter, pool, valset=None, **kw):
    opts = dict(max_exemplars=4, budget=600, reserve_output_tokens=50, token_counter=counter, embedder=embedder,
                progress=False)
    opts.update(kw)
    return KnapsackFewShot(**opts).compile(TinyQA(), trainset=pool, valset=valset)


def load_tiny(path, embedder, counter):
    return load_compiled(TinyQA(), path, embedder=embedder, token_counter=counter)


def test_costs_are_measured_in_the_prompt_format(embedder, counter):
    pool = make_examples(30)
    program = compile_tiny(embedder, counter, pool)
    model = PromptCostModel(TinySig, counter)
    for ex, cost in zip(pool, program.answer.selection.costs, strict=True):
        demo = {"context": ex.context, "question": ex.question, "answer": ex.answer}
        assert cost == model.demo_cost(demo)
    assert len(set(program.answer.selection.costs)) > 5  # costs differ with the demo's length


@pytest.mark.parametrize("counter_kind", ["words", "litellm"])
def test_token_cost_additivity(embedder, counter_kind):
    if counter_kind == "words":
        cnt = WordCounter()
    else:  # a real tokenizer: litellm's offline tokenizer for gpt-4o-mini
        from knapsack_dspy.llm.token_counter import get_token_counter

        cnt = get_token_counter("openai/gpt-4o-mini")
    pool = make_examples(40)
    program = compile_tiny(embedder, cnt, pool, budget=1500)
    model = PromptCostModel(TinySig, cnt)
    for query in make_examples(5, seed=3, prefix="q"):
        inputs = {"context": query.context, "question": query.question}
        base = model.base_tokens(inputs)
        chosen = program.answer.selection(base_tokens=base, question=query.question)
        assert chosen.demos
        full = model.prompt_tokens(inputs, [dict(d) for d in chosen.demos])
        selection = program.answer.selection
        predicted = base + sum(selection.costs[selection.pool_ids.index(i)] for i in chosen.ids)
        assert abs(full - predicted) <= 2, (full, predicted)  # only the adapter's fixed overhead may differ
        assert predicted <= 1500 - 50  # within budget minus the output reserve


def test_selection_respects_budget_and_excludes_own_document(embedder, counter):
    pool = make_examples(60)
    program = compile_tiny(embedder, counter, pool, budget=400)
    for ex in pool[:10]:
        out = program.answer.selection(base_tokens=100, id=ex.id, doc_id=ex.doc_id, question=ex.question)
        assert out.selection["total_cost"] <= 400 - 100 - 50
        assert ex.id not in out.ids
        assert all(pool[int(i[2:])].doc_id != ex.doc_id for i in out.ids)
        sims = out.selection
        assert len(out.ids) <= 4
        assert sims["within_budget"]


def test_demos_ordered_most_similar_last(embedder, counter):
    pool = make_examples(40)
    program = compile_tiny(embedder, counter, pool, budget=4000, selector="kate")
    q = "What was the tax rate in 2003?"
    out = program.answer.selection(base_tokens=0, question=q)
    pool_obj = program.answer.selection.pool()
    sims = pool_obj.similarities(embedder.encode([q])[0])
    chosen_sims = [sims[pool_obj.index_of([i])[0]] for i in out.ids]
    assert chosen_sims == sorted(chosen_sims)


def test_save_load_round_trip_gives_identical_selections(tmp_path, embedder, counter):
    pool = make_examples(50)
    program = compile_tiny(embedder, counter, pool, valset=make_examples(10, seed=5, prefix="v"))
    path = tmp_path / "prog.json"
    program.save(str(path))
    saved = json.loads(path.read_text())
    assert saved["answer"]["selection"]["pool"]["ids"][:2] == ["ex0", "ex1"]
    with pytest.raises(NotCompiledError):
        SelectExemplars(embedder=embedder)(base_tokens=0, question="x?")
    fresh = load_tiny(path, embedder, counter)
    for q in make_examples(8, seed=9, prefix="q"):
        a = program.answer.selection(base_tokens=50, question=q.question)
        b = fresh.answer.selection(base_tokens=50, question=q.question)
        assert a.ids == b.ids
    assert fresh.answer.selection.classifiers.keys() == program.answer.selection.classifiers.keys()


@pytest.mark.parametrize("mode", ["static", "hybrid"])
def test_static_and_hybrid_modes_round_trip(tmp_path, embedder, counter, mode):
    pool = make_examples(50)
    program = compile_tiny(embedder, counter, pool, valset=make_examples(12, seed=2, prefix="v"), mode=mode)
    fixed = program.answer.selection.selector_state["fixed_ids"]
    assert fixed and len(fixed) <= 4
    path = tmp_path / "p.json"
    program.save(str(path))
    fresh = load_tiny(path, embedder, counter)
    for q in make_examples(5, seed=4, prefix="q"):
        a = program.answer.selection(base_tokens=10, question=q.question).ids
        b = fresh.answer.selection(base_tokens=10, question=q.question).ids
        assert a == b
        if mode == "static":
            assert set(a) <= set(fixed)
        else:
            assert set(a) & set(fixed)


def test_load_rejects_corrupt_state(tmp_path, embedder, counter):
    program = compile_tiny(embedder, counter, make_examples(20))
    path = tmp_path / "p.json"
    program.save(str(path))
    state = json.loads(path.read_text())
    pool = state["answer"]["selection"]["pool"]
    pool["costs"] = pool["costs"][:-1]
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"pool\.costs has 19 entries for 20 ids"):
        load_tiny(path, embedder, counter)


def test_thread_safety_under_threaded_evaluate(embedder, counter):
    pool = make_examples(60)
    program = compile_tiny(embedder, counter, pool, budget=800)
    devset = make_examples(24, seed=11, prefix="d")
    expected = {ex.question: program.answer.selection(base_tokens=PromptCostModel(TinySig, counter).base_tokens(
        {"context": ex.context, "question": ex.question}), id=ex.id, doc_id=ex.doc_id, question=ex.question).ids
        for ex in devset}
    lm = DummyLM([{"answer": "42"}] * 200)
    seen = {}

    def metric(example, pred, trace=None):
        seen[example.question] = pred.demo_ids
        return pred.answer == "42"

    with dspy.context(lm=lm):
        result = dspy.Evaluate(devset=devset, metric=metric, num_threads=8)(program)
    assert result.score == 100.0
    assert seen == expected
    # the LM saw, for each question, exactly that question's demos (nothing leaked between threads)
    by_question = {ex.question: ex for ex in devset}
    pool_by_id = {ex.id: ex for ex in pool}
    for entry in lm.history:
        user_messages = [m["content"] for m in entry["messages"] if m["role"] == "user"]
        question = re.search(r"\[\[ ## question ## \]\]\n(.*)", user_messages[-1]).group(1).strip()
        demo_questions = [re.search(r"\[\[ ## question ## \]\]\n(.*)", m).group(1).strip() for m in user_messages[:-1]]
        assert demo_questions == [pool_by_id[i].question for i in expected[question]]
        assert question in by_question
    assert program.answer.demos == []  # shared predictor state untouched


def test_search_uses_proxies_and_reports(embedder, counter):
    pool = make_examples(60)
    val = make_examples(15, seed=7, prefix="v")
    program = compile_tiny(embedder, counter, pool, valset=val,
                           search_space={"alpha": [0.5, 1.0], "max_exemplars": [2, 4]})
    report = program.compile_report["predictors"]["answer"]
    assert program.compile_report["cost"]["lm_calls"] == 0
    assert len(report["configs"]) == 4
    assert all("proxies" in c and 0 <= c["proxies"]["score"] <= 1 for c in report["configs"])
    assert report["chosen"] in [c["config"] for c in report["configs"]]
    best = max(report["configs"], key=lambda c: c["proxies"]["score"])
    assert report["chosen"] == best["config"]  # no metric: the best proxy wins
    assert "modality" in report["attribute_accuracy"]


def test_search_with_metric_evaluates_top_configs_with_lm(embedder, counter):
    pool = make_examples(40)
    val = make_examples(6, seed=8, prefix="v")
    lm = DummyLM([{"answer": "1"}] * 100)
    with dspy.context(lm=lm):
        program = compile_tiny(embedder, counter, pool, valset=val, metric=lambda e, p, t=None: 1.0,
                               search_space={"max_exemplars": [1, 2, 3]}, max_lm_configs=2)
    lm_scored = [c for c in program.compile_report["predictors"]["answer"]["configs"] if "lm_score" in c]
    assert len(lm_scored) == 2
    assert len(lm.history) == 2 * len(val)


def test_compile_errors_are_clear(embedder, counter):
    with pytest.raises(CompileError, match="trainset"):
        compile_tiny(embedder, counter, [])
    with pytest.raises(CompileError, match="mode"):
        compile_tiny(embedder, counter, make_examples(5), mode="weird")

    class NoPredictor(dspy.Module):
        def forward(self, question):
            return dspy.Prediction(answer=question)

    with pytest.raises(CompileError, match=r"NoPredictor has no dspy\.Predict to compile"):
        KnapsackFewShot(token_counter=counter).compile(NoPredictor(), trainset=make_examples(5))
    unlabelled = [dspy.Example(question="q?", context="c") for _ in range(3)]
    with pytest.raises(CompileError, match=r"empty exemplar pool for \['answer'\]"):
        compile_tiny(embedder, counter, unlabelled)
    with pytest.raises(CompileError, match=r"the student has no predictor \['answr'\]; its predictors: \['answer'\]"):
        compile_tiny(embedder, counter, make_examples(5), predictors=["answr"])
    with pytest.raises(ValueError, match="unknown selector"):
        SelectExemplars(selector="nope", embedder=embedder)


def test_gold_attribute_source_requires_attributes(embedder, counter):
    program = compile_tiny(embedder, counter, make_examples(30), selector="seer_gold")
    assert program.answer.selection.attribute_source == "gold"
    out = program.answer.selection(base_tokens=0, question="What was the net income?", modality="text")
    assert out.selection["predicted_attributes"] == {"modality": "text"}
    with pytest.raises(ValueError, match="gold"):
        program.answer.selection(base_tokens=0, question="What was the net income?")


def test_fixed_set_with_metric_keeps_best_lm_scored_set(embedder, counter):
    pool = make_examples(30)
    val = make_examples(4, seed=12, prefix="v")
    lm = DummyLM([{"answer": "1"}] * 500)

    def metric(example, pred, trace=None):  # rewards sets holding low-numbered exemplars
        return sum(1.0 / (1 + int(i[2:])) for i in pred.demo_ids)

    with dspy.context(lm=lm):
        tele = KnapsackFewShot(metric=metric, selector="fixed", selector_params={"n_candidates": 3}, max_exemplars=2,
                               budget=600, reserve_output_tokens=50, token_counter=counter, progress=False)
        program = tele.compile(TinyQA(), trainset=pool, valset=val)
    scored = program.answer.selection.selector_state["candidates"]
    assert len(scored) == 3 and len({tuple(c["ids"]) for c in scored}) == 3
    best = max(scored, key=lambda c: c["score"])
    assert program.answer.selection.selector_state["fixed_ids"] == best["ids"]
    # each candidate set was LM-evaluated on the 4 validation questions
    assert len(lm.history) == 3 * len(val)


def test_lm_attribute_source_predicts_with_one_demo_per_value_and_round_trips(tmp_path, embedder, counter):
    pool = make_examples(30)
    program = compile_tiny(embedder, counter, pool, attribute_source="lm", selector="seer")
    predictor = program.answer.selection.lm_attribute_predictor
    demos = predictor.demos["modality"]
    assert sorted(d["modality"] for d in demos) == ["hybrid", "table", "text"]  # one per value
    lm = DummyLM([{"modality": "text"}] * 10)
    with dspy.context(lm=lm):
        out = program.answer.selection(base_tokens=0, question="What was the net income in 2001?")
    assert out.selection["predicted_attributes"] == {"modality": "text"}
    prompt = lm.history[0]["messages"]
    assert sum(1 for m in prompt if m["role"] == "assistant") == 3  # the three demos
    path = tmp_path / "p.json"
    program.save(str(path))
    fresh = load_tiny(path, embedder, counter)
    assert fresh.answer.selection.lm_attribute_predictor.demos == predictor.demos
    with dspy.context(lm=DummyLM([{"modality": "table"}] * 10)):
        out = fresh.answer.selection(base_tokens=0, question="What was the net income in 2001?")
    assert out.selection["predicted_attributes"] == {"modality": "table"}
    selection = program.answer.selection
    assert (sum(selection.pool_attributes["modality"][selection.pool_ids.index(i)] == "table"
                for i in out.ids) >= 3)  # alpha=0.75 of M=4 follow the prediction


def test_compile_builds_its_config_from_the_students_and_leaves_the_student_alone(embedder, counter):
    student = TinyQA(selector="kate", max_exemplars=3, attributes=("modality", "answer_type"))
    before = student.selection_config("answer")
    tele = KnapsackFewShot(max_exemplars=2, budget=900, token_counter=counter, embedder=embedder, progress=False)
    program = tele.compile(student, trainset=make_examples(20))
    assert type(student.answer) is dspy.Predict and student.answer.demos == []  # the student is left alone
    assert program.answer.selection.config == dataclasses.replace(before, max_exemplars=2, budget=900)
    assert program.answer.selection.resolved_budget == 900
    report = program.compile_report["predictors"]["answer"]
    assert report["selector"] == "kate" and report["mode"] == "per_query"
    with pytest.raises(CompileError, match=r"unknown argument 'max_exemplar'; selection settings: selector"):
        KnapsackFewShot(max_exemplar=2)
    with pytest.raises(CompileError, match=r"search_space keys must be selection settings"):
        KnapsackFewShot(search_space={"temperature": [0.1]})
    with pytest.raises(CompileError, match=r"search_space point .*'alpha': 2.*alpha must be a number in \[0, 1\]"):
        compile_tiny(embedder, counter, make_examples(5), search_space={"alpha": [0.5, 2]})
    with pytest.raises(CompileError, match="selector 'seer' selects 'per_query', not in mode 'static'"):
        compile_tiny(embedder, counter, make_examples(5), mode="static", selector="seer")


def test_the_search_varies_any_setting(embedder, counter):
    program = compile_tiny(embedder, counter, make_examples(40), valset=make_examples(8, seed=4, prefix="v"),
                           search_space={"knn_k": [5, 50]})
    report = program.compile_report["predictors"]["answer"]
    assert [c["config"] for c in report["configs"]] == [
        {"alpha": 0.75, "beta": 0.0, "max_exemplars": 4, "knn_k": 5},
        {"alpha": 0.75, "beta": 0.0, "max_exemplars": 4, "knn_k": 50}]
    assert program.answer.selection.config.knn_k == report["chosen"]["knn_k"]


def test_select_exemplars_rejects_unknown_settings(embedder):
    with pytest.raises(ValueError, match="unknown selection setting 'max_exemplar'"):
        SelectExemplars(max_exemplar=2, embedder=embedder)
    config = SelectionConfig(selector="kate")
    assert SelectExemplars(config, embedder=embedder, max_exemplars=2).config == dataclasses.replace(
        config, max_exemplars=2)


def test_show_fixed_set_selects_the_set_on_a_copy(embedder, counter):
    program = compile_tiny(embedder, counter, make_examples(30))
    probe = program.deepcopy()
    probe.answer.selection.show_fixed_set(["ex5", "ex9", "ex12"])
    assert program.answer.selection.config.selector == DEFAULT_SELECTOR  # the original is untouched
    out = probe.answer.selection(base_tokens=0, id="ex9", doc_id="exdoc3", question="What was the tax rate?")
    assert sorted(out.ids) == ["ex12", "ex5"]  # ex9 is the query itself
    with pytest.raises(ValueError, match=r"ids not in the exemplar pool: \['nope'\]"):
        probe.answer.selection.show_fixed_set(["nope"])


def test_the_seed_seeds_per_query_draws(embedder, counter):
    pool = make_examples(40)
    questions = [f"What was the revenue in {2000 + i}?" for i in range(6)]

    def picks(seed):
        program = compile_tiny(embedder, counter, pool, selector="random", budget=10_000, seed=seed)
        return [program.answer.selection(base_tokens=0, question=q).ids for q in questions]

    assert picks(0) == picks(0)
    assert picks(0) != picks(1)


def test_a_version_1_state_loads(tmp_path, embedder, counter):
    """Programs saved before SelectionConfig kept the settings under "params" (the teleprompter's extra settings
    in selector_params, the resolved budget and attribute source)."""
    program = compile_tiny(embedder, counter, make_examples(30), selector="fixed")
    path = tmp_path / "p.json"
    program.save(str(path))
    saved = json.loads(path.read_text())
    state = saved["answer"]["selection"]
    config = state.pop("config")
    state.update(version=1, params={
        "selector": "fixed", "max_exemplars": 4, "budget": 600, "reserve_output_tokens": 50,
        "attribute_source": "classifier", "attributes": ["modality"], "embed_fields": ["question"],
        "selector_params": {"alpha": 0.75, "beta": 0.0, "knn_k": 200, "max_per_doc": None, "core_size": 2,
                            "n_candidates": 5, "seed": 0},
        "exclude_same_doc": True, "seed": 0})
    path.write_text(json.dumps(saved))
    fresh = load_tiny(path, embedder, counter)
    assert fresh.answer.selection.config == dataclasses.replace(SelectionConfig.from_dict(config), budget=600,
                                                      attribute_source="classifier",
                                                      selector_params={"n_candidates": 5})
    for q in make_examples(5, seed=9, prefix="q"):
        assert fresh.answer.selection(base_tokens=20, question=q.question).ids == \
            program.answer.selection(base_tokens=20, question=q.question).ids
    saved["answer"]["selection"]["version"] = 7
    path.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="state version 7 is not supported"):
        load_tiny(path, embedder, counter)
