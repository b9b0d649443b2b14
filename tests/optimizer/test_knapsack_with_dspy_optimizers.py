"""KnapsackFewShot with DSPy's other optimizers: a teacher's traces as the pool, BootstrapFewShot with a knapsack
teacher or a knapsack student, instruction optimizers (MIPROv2 with 0 demos, GEPA) on a knapsack program with the
budget still exact, and clear errors for what cannot work."""

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import FieldFillingLM, WordCounter
from test_knapsack_any_program import TwoStep, embedder, qa_examples, teleprompter

from knapsack_dspy.modules.selecting_predict import SelectingPredict
from knapsack_dspy.modules.selection_context import selection_log
from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError

__all__ = ["embedder"]  # the module-scoped HashingEmbedder fixture of test_knapsack_any_program


def knapsack(embedder, **settings):
    """The teleprompter of test_knapsack_any_program (word-counted, budget 1500, M=3) with SEER."""
    return teleprompter(embedder, **{"selector": "seer", **settings})


def right_for_even(examples):
    """A DummyLM answering ChainOfThought prompts: right for the even-numbered questions, wrong for the others."""
    answers = {}
    for ex in examples:
        right = int(ex.id[1:]) % 2 == 0
        answers[ex.question] = {"reasoning": f"because of {ex.label}", "answer": ex.answer if right else "wrong"}
    return DummyLM(answers)


def test_a_teachers_successful_traces_are_the_pool(embedder):
    trainset = qa_examples(20)
    metric = lambda example, prediction, trace=None: prediction.answer == example.answer  # noqa: E731
    with dspy.context(lm=right_for_even(trainset)):
        program = knapsack(embedder, metric=metric).compile(dspy.ChainOfThought("question -> answer"),
                                                            trainset=trainset, teacher=dspy.ChainOfThought(
                                                                "question -> answer"))
    selection = program.predict.selection
    assert selection.pool_ids == [f"t{i}" for i in range(0, 20, 2)]  # only the runs the metric accepted
    assert all(d["reasoning"].startswith("because of") for d in selection.demos)  # the teacher's reasoning
    assert program.compile_report["teacher"] == {"runs": 20, "successes": 10, "failures": 0,
                                                 "rejected_by_metric": 10, "first_error": None}


def test_a_knapsack_program_can_teach(embedder):
    """The teacher selects its own demos per question (and never the question itself): BootstrapFewShot's
    traces come from those prompts."""
    trainset = qa_examples(20)
    teacher = knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset)
    lm = right_for_even(trainset)
    with dspy.context(lm=lm):
        program = knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset,
                                             teacher=teacher)
        bootstrapped = dspy.BootstrapFewShot(max_bootstrapped_demos=2, max_labeled_demos=0).compile(
            dspy.ChainOfThought("question -> answer"), teacher=teacher, trainset=trainset)
    assert len(program.predict.selection.pool_ids) == 20  # no metric: every run
    shown = [sum(m["role"] == "assistant" for m in entry["messages"]) for entry in lm.history]
    assert all(n == 3 for n in shown)  # every teacher prompt held its selected demos
    assert [d.reasoning for d in bootstrapped.predict.demos] == ["because of capital", "because of river"]


def test_bootstrap_on_a_knapsack_program_adds_a_fixed_prefix(embedder):
    trainset = qa_examples(20)
    program = knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset)
    lm = right_for_even(trainset)
    with dspy.context(lm=lm):
        both = dspy.BootstrapFewShot(max_bootstrapped_demos=2, max_labeled_demos=0).compile(program,
                                                                                           trainset=trainset)
        with selection_log() as log:
            both(question=trainset[5].question)
    assert isinstance(both.predict, SelectingPredict) and len(both.predict.demos) == 2
    assert log[0].info["fixed_demos"] == 2 and len(log[0].info["ids"]) == 3
    assert sum(m["role"] == "assistant" for m in lm.history[-1]["messages"]) == 5


def _instruction_run(program, lm, question="What is the capital of Peru?"):
    with dspy.context(lm=lm), selection_log() as log:
        prediction = program(question=question)
    return prediction, log[0].info, WordCounter().count_messages(lm.prompts[-1])


def test_mipro_zero_demo_changes_instructions_and_the_budget_stays_exact(embedder):
    pytest.importorskip("optuna")
    trainset, valset = qa_examples(20), qa_examples(6, prefix="v")
    program = knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset)
    proposal = "Answer like the closest worked example, in the same style and with the same care. " * 15
    lm = FieldFillingLM({"proposed_instruction": proposal,
                         "answer": lambda messages: "good" if "closest worked example" in messages[0]["content"]
                         else "bad"})
    _, before, _ = _instruction_run(program, lm)
    metric = lambda example, prediction, trace=None: float(prediction.answer == "good")  # noqa: E731
    with dspy.context(lm=lm):
        tuned = dspy.MIPROv2(metric=metric, auto=None, num_candidates=2, max_bootstrapped_demos=0,
                             max_labeled_demos=0, num_threads=1, verbose=False).compile(
            program, trainset=trainset, valset=valset, num_trials=3, minibatch=False)
    assert isinstance(tuned.predict, SelectingPredict) and tuned.predict.demos == []  # 0 demos: no prefix
    assert "closest worked example" in tuned.predict.signature.instructions
    prediction, after, sent = _instruction_run(tuned, lm)
    assert prediction.answer == "good"
    assert after["base_tokens"] > before["base_tokens"] + 150  # the new instructions are measured
    assert abs(after["prompt_tokens"] - sent) <= 2 and sent <= 1500 - 100


def test_gepa_rewrites_instructions_and_the_budget_stays_exact(embedder):
    trainset, valset = qa_examples(20), qa_examples(6, prefix="v")
    program = knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=trainset)
    new = "Read the closest worked example first, then answer in the same style. " * 20
    lm = FieldFillingLM({"new_instruction": f"```\n{new}\n```",
                         "answer": lambda messages: "good" if "closest worked example" in messages[0]["content"]
                         else "bad"})
    _, before, _ = _instruction_run(program, lm)

    def metric(gold, prediction, trace=None, pred_name=None, pred_trace=None):
        return dspy.Prediction(score=float(prediction.answer == "good"), feedback="use the closest worked example")

    with dspy.context(lm=lm):
        tuned = dspy.GEPA(metric=metric, max_metric_calls=60, reflection_lm=lm, num_threads=1).compile(
            program, trainset=trainset[:8], valset=valset)
    assert isinstance(tuned.predict, SelectingPredict)
    prediction, after, sent = _instruction_run(tuned, lm)
    assert prediction.answer == "good"
    assert after["base_tokens"] > before["base_tokens"] + 150
    assert abs(after["prompt_tokens"] - sent) <= 2 and sent <= 1500 - 100


def test_what_cannot_work_is_a_clear_error(embedder):
    trainset = qa_examples(10)
    with pytest.raises(CompileError, match=r"the teacher has no predictor \['classify'.*student's structure"):
        knapsack(embedder).compile(TwoStep(), trainset=trainset, teacher=dspy.ChainOfThought("question -> answer"))
    with pytest.raises(CompileError, match=r"teacher=: the teacher runs on the trainset, which needs an LM"), \
            dspy.context(lm=None):
        knapsack(embedder).compile(dspy.Predict("question -> answer"), trainset=trainset,
                                   teacher=dspy.Predict("question -> answer"))
    unmarked = [dspy.Example(id="a", question="q?", answer="a")]
    with pytest.raises(CompileError, match=r"a teacher run needs the example's inputs marked"), \
            dspy.context(lm=DummyLM([{"answer": "a"}])):
        knapsack(embedder).compile(dspy.Predict("question -> answer"), trainset=unmarked,
                                   teacher=dspy.Predict("question -> answer"))
    with pytest.raises(CompileError, match=r"no teacher run succeeded \(first error: .*boom"), \
            dspy.context(lm=DummyLM([{"answer": "a"}])):
        class Broken(dspy.Module):
            def __init__(self):
                super().__init__()
                self.predict = dspy.Predict("question -> reasoning, answer")

            def forward(self, question):
                raise RuntimeError("boom")

        knapsack(embedder).compile(dspy.ChainOfThought("question -> answer"), trainset=qa_examples(3),
                                   teacher=Broken())
