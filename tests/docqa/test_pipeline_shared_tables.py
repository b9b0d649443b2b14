"""No table shown twice in one prompt: demos of one document share its table, and the budget counts it once."""

import os
from pathlib import Path

import dspy
import pytest
from dspy.utils import DummyLM
from helpers import HashingEmbedder, WordCounter

from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.modules.shared_fields import group_demos, reference_text, referring_demo
from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))
pytestmark = pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")


def test_demos_are_grouped_by_the_shared_value():
    demos = [{"table": "A", "q": 1}, {"table": "B", "q": 2}, {"table": "A", "q": 3}, {"table": "", "q": 4},
             {"table": "", "q": 5}, {"table": "C", "q": 6}]
    assert group_demos(demos, ("table",)) == [0, -1, 0, -1, -1, -1]
    assert group_demos(demos, ()) == [-1] * 6
    assert referring_demo(demos[0], ("table",)) == {"table": reference_text("table"), "q": 1}


@pytest.fixture(scope="module")
def program():
    from knapsack_dspy.docqa.data import load_examples

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:150]
    student = build_pipeline("tatqa", "pot", route=None, selector="kate", max_exemplars=4, embedder=HashingEmbedder(),
                             token_counter=WordCounter(), attributes=(), demo_table="all",
                             demo_paragraphs="all")  # whole tables, which demos of one document share
    return KnapsackFewShot(budget=6000, token_counter=student.token_counter, progress=False).compile(
        student, trainset=pool)


def test_a_prompt_shows_each_table_once_and_costs_what_it_sends(program):
    from knapsack_dspy.docqa.data import load_examples

    select = program.select
    assert select.groups and max(select.groups) >= 1  # pool questions of one document share their table
    tune = list(load_examples("tatqa", split="dev_tune", data_dir=DATA))[:30]
    checked = 0
    for example in tune:
        lm = DummyLM([{"program": "ans = 1"}])
        with dspy.context(lm=lm, adapter=dspy.ChatAdapter()):
            pred = program(**program.example_inputs(example))
        selection = pred.selection
        messages = lm.history[0]["messages"]
        demo_messages = [m["content"] for m in messages[1:-1] if m["role"] == "user"]
        tables = [c.split("[[ ## table ## ]]\n", 1)[1].split("\n\n[[ ## text ## ]]")[0] for c in demo_messages]
        shown = [t for t in tables if t != reference_text("table")]
        assert len(shown) == len(set(shown)), "a table shown twice"
        if selection.get("shared"):
            checked += 1
            assert sum(selection["shared"]) == len(tables) - len(shown)
        # what the budget counted is what was sent (the counter is additive per message)
        assert selection["prompt_tokens"] == WordCounter().count_messages(messages)
    assert checked > 0


def test_sharing_can_be_turned_off():
    from knapsack_dspy.docqa.data import load_examples

    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:60]
    student = build_pipeline("tatqa", "pot", route=None, selector="kate", max_exemplars=4, embedder=HashingEmbedder(),
                             token_counter=WordCounter(), attributes=(), shared_fields=(), demo_table="all",
                             demo_paragraphs="all")
    compiled = KnapsackFewShot(budget=6000, token_counter=student.token_counter, progress=False).compile(
        student, trainset=pool)
    assert compiled.select.groups == [] and compiled.select.config.shared_fields == ()


def test_rows_fingerprint_the_prompts_they_sent(program):
    from knapsack_dspy.bench.execution.example_runner import answer_example
    from knapsack_dspy.bench.results.prompt_record import PROMPT_FORMAT_VERSION, messages_sha256
    from knapsack_dspy.docqa.data import load_examples

    example = next(iter(load_examples("tatqa", split="dev_tune", data_dir=DATA)))
    lm = DummyLM([{"program": "ans = 1"}])
    row = answer_example(program, example, lm)
    assert row["prompt_format"] == PROMPT_FORMAT_VERSION
    assert row["prompt_sha256"] == [messages_sha256(lm.history[0]["messages"])]
