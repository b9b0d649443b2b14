"""One example, one results row: selection only (no LM) or the full pipeline with the LM.

A row holds the inputs' ids, the selected exemplar ids, prompt tokens, within-budget flag, the output
(program / reasoning), the executed answer, correctness (EM / F1 where the dataset defines them),
latency, usage and the error if any — never an exception out of here for one bad example, except a
KeyboardInterrupt, which stops the run (the row in flight is simply not written).
"""

from __future__ import annotations

import time
import traceback
from types import SimpleNamespace

import dspy

from knapsack_dspy.bench.prompt_record import PromptRecorder
from knapsack_dspy.bench.scoring import score_prediction, selection_quality
from knapsack_dspy.llm import counting_calls
from knapsack_dspy.llm.errors import describe_lm_error


def _selection_fields(program, selection: dict, example) -> dict:
    row = {
        "exemplar_ids": list(selection.get("ids", [])),
        "prompt_tokens": selection.get("prompt_tokens"),
        "within_budget": None if selection.get("within_budget") is None else bool(selection["within_budget"]),
        "selection_ms": round(float(selection.get("selection_ms", 0.0)), 3),
        "predicted_attributes": selection.get("predicted_attributes", {}),
        "relaxed": selection.get("relaxed", []),
    }
    row.update(selection_quality(program.select, example, row["exemplar_ids"]))
    return row


_NO_ANSWER = SimpleNamespace(answer=None, scale=None)  # how a failed LM call is scored


def _selection_after_failure(program, example) -> dict:
    """The selection fields of an example whose LM call failed: what the prompt would have held (selection
    is deterministic), so budget and exemplar statistics still cover it; unknown (None) if selection fails too."""
    try:
        return _selection_fields(program, program.select_for(example), example)
    except Exception:  # noqa: BLE001 - the original failure is what gets reported
        return {"exemplar_ids": [], "within_budget": None}


def select_example(program, example) -> dict:
    """Selection only: which exemplars, how many tokens, how good (model-free)."""
    try:
        selection = program.select_for(example)
        row = _selection_fields(program, selection, example)
        row["error"] = None
    except Exception as exc:  # noqa: BLE001 - any failure is recorded; the run goes on
        row = {"exemplar_ids": [], "within_budget": None, "error": f"{type(exc).__name__}: {exc}"}
    return row


# What a prediction may say about how it answered: the route it took (routed pipelines), the raw reply of an
# extraction, and how its scale was decided (the model's own scale and the rule that chose the answer's).
_DETAILS = ("route", "routed_answer_type", "p_extract", "raw_answer", "model_scale", "scale_reason")


def _answer_details(prediction) -> dict:
    return {key: _jsonable(prediction.get(key)) for key in _DETAILS if prediction.get(key) not in (None, "")}


def _usage(prediction) -> dict:
    try:
        usage = prediction.get_lm_usage() or {}
    except Exception:  # noqa: BLE001 - usage is bookkeeping: a prediction without it still counts
        usage = {}
    prompt = sum(int(u.get("prompt_tokens") or 0) for u in usage.values())
    completion = sum(int(u.get("completion_tokens") or 0) for u in usage.values())
    return {"prompt_tokens_used": prompt, "completion_tokens_used": completion}


def answer_example(program, example, lm) -> dict:
    """The full pipeline on one example with ``lm``; errors are recorded, not raised."""
    inputs = program.example_inputs(example)
    started = time.perf_counter()
    prompts = PromptRecorder()  # the fingerprint of every prompt this example sends
    with counting_calls() as calls:  # this example's provider calls, cache hits and cost (thread-safe)
        try:
            with dspy.context(lm=lm, track_usage=True, callbacks=[*dspy.settings.callbacks, prompts]):
                prediction = program(**inputs)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is recorded; the run goes on
            row = _selection_after_failure(program, example)
            row.update(score_prediction(example, _NO_ANSWER))
            row.update({"output": None, "answer": None, "error": _describe(exc),
                        "lm_seconds": time.perf_counter() - started, "lm_calls": calls.calls,
                        "cache_hits": calls.cache_hits, "cost_usd": calls.cost,
                        "traceback": traceback.format_exc(limit=3)})
            return row
    row = _selection_fields(program, prediction.selection, example) if getattr(prediction, "selection", None) else {
        "exemplar_ids": [], "within_budget": True}
    row.update({
        "output": getattr(prediction, "program", None) or getattr(prediction, "reasoning", None),
        "answer": _jsonable(getattr(prediction, "answer", None)),
        "scale": getattr(prediction, "scale", None),
        "error": getattr(prediction, "error", None),
        "attempts": getattr(prediction, "attempts", None),
        "lm_calls": calls.calls,
        "cache_hits": calls.cache_hits,
        "cost_usd": calls.cost,
    })
    row.update(_answer_details(prediction))
    row.update(prompts.row_fields())
    row.update(_usage(prediction))
    if getattr(prediction, "sample_answers", None) is not None:  # self-consistency: what each sample computed
        row.update(sample_answers=_jsonable(prediction.sample_answers), votes=getattr(prediction, "votes", None))
    row.update(score_prediction(example, prediction))
    return row


def _jsonable(value):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return str(value)


def _describe(exc: Exception) -> str:
    try:
        return describe_lm_error(exc)
    except Exception:  # noqa: BLE001 - describing the error must not replace it
        return f"{type(exc).__name__}: {exc}"
