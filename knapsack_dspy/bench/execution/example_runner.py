"""One example, one results row: selection only (no LM) or the full pipeline with the LM.

A row holds the inputs' ids, the selected exemplar ids, prompt tokens (of which ``exemplar_tokens`` the
exemplars'), within-budget flag, the output
(program / reasoning), the executed answer, correctness (EM / F1 where the dataset defines them),
latency (``latency_s``, of which ``lm_seconds`` inside LM calls and ``selection_ms`` selecting), usage, the error
if any and its kind (``error_kind``, see ``row_outcomes``). What the provider's prompt cache served:
``cached_prompt_tokens`` (of the example's real calls; 0 when the provider does not say), ``cache_write_tokens``
(Anthropic cache writes, when any), and for the embedded models the LM time split into ``prefill_s`` (prompt
processing) and ``decode_s`` (generation), from llama.cpp's timings. Per LM call, the prompt tokens the provider
reported beside the run's own count of the call's messages (``reported_prompt_tokens`` /
``counted_prompt_tokens``, ``call_tokens``).

:func:`run_example` is the per-example guard: answering, scoring and writing the row all happen inside it
(:func:`example_row` is the same without the writing, for workers that hand their rows to the one writer),
and nothing an example does -- an LM failure, an answer no metric can read, a value JSON cannot carry --
raises out of it; the row records what happened. Only a KeyboardInterrupt stops the run (the row in flight is
simply not written), and a results file that cannot be written (``ResultsFileError``: full disk, read-only
directory), which is a fault of the directory, not of the example.
"""

from __future__ import annotations

import time
import traceback
from types import SimpleNamespace

import dspy
from dspy.utils.exceptions import AdapterParseError

from knapsack_dspy.bench.execution.call_tokens import CallTokens, run_token_counter
from knapsack_dspy.bench.execution.lm_timing import LMTimer
from knapsack_dspy.bench.results.prompt_record import PromptRecorder
from knapsack_dspy.bench.results.row_outcomes import ANSWER, INTERNAL, TRANSIENT
from knapsack_dspy.bench.results.row_schema import ResultRow
from knapsack_dspy.bench.scoring.example_scores import score_prediction, selection_quality
from knapsack_dspy.llm import counting_calls, lm_error_kind
from knapsack_dspy.llm.call_counter import observing_calls
from knapsack_dspy.llm.errors import cause_chain, describe_lm_error
from knapsack_dspy.messages import one_line
from knapsack_dspy.paths import portable_traceback


def _selection_fields(program, selection: dict, example) -> dict:
    row = {
        "exemplar_ids": list(selection.get("ids", [])),
        "prompt_tokens": selection.get("prompt_tokens"),
        "within_budget": None if selection.get("within_budget") is None else bool(selection["within_budget"]),
        "selection_ms": round(float(selection.get("selection_ms", 0.0)), 3),
        "predicted_attributes": selection.get("predicted_attributes", {}),
        "relaxed": selection.get("relaxed", []),
    }
    if selection.get("limit"):  # a knapsack's limit ended a search (of this set, or of one a relaxation replaced)
        row["selection_limit"] = selection["limit"]
        if selection.get("outcome") in ("incumbent", "greedy"):  # the set is the solver's best or the greedy's
            row["selection_status"] = selection["outcome"]
    if selection.get("total_cost") is not None:  # the selected exemplars' own tokens (an exemplar budget's measure)
        row["exemplar_tokens"] = round(float(selection["total_cost"]))
    if selection.get("token_count") is not None:  # "estimate": prompt_tokens / within_budget are approximate
        row["token_count"] = selection["token_count"]
    for key in ("new_prompt_tokens", "predicted_latency_s", "latency_budget"):  # a latency model's prediction
        if selection.get(key) is not None:
            row[key] = selection[key]
    row.update(_prompt_parts(selection))
    row.update(selection_quality(program.select, example, row["exemplar_ids"]))
    return row


def _prompt_parts(selection: dict) -> dict:
    """The prompt's instructions (their hash and tokens, what is left after them) and, with selectable evidence,
    the pieces shown (``docs/core.md``, "Selectable context")."""
    row: dict = {}
    if selection.get("instructions_sha256"):
        row["instructions_sha256"] = str(selection["instructions_sha256"])
    if selection.get("instruction_tokens") is not None:
        row["instruction_tokens"] = int(selection["instruction_tokens"])
        if selection.get("prompt_tokens") is not None:
            row["tokens_after_instructions"] = int(selection["prompt_tokens"]) - row["instruction_tokens"]
    if selection.get("evidence_mode"):
        row["evidence_mode"] = str(selection["evidence_mode"])
        row.update(pieces_kept=int(selection.get("pieces_kept") or 0),
                   pieces_offered=int(selection.get("pieces_offered") or 0),
                   evidence_tokens=round(float(selection.get("evidence_tokens") or 0.0)),
                   evidence_pieces={str(k): [int(i) for i in v] for k, v in (selection.get("pieces") or {}).items()})
    return row


_NO_ANSWER = SimpleNamespace(answer=None, scale=None)  # how a failed LM call is scored


def _selection_after_failure(program, example) -> dict:
    """The selection fields of an example whose LM call failed: what the prompt would have held (selection
    is deterministic), so budget and exemplar statistics still cover it; unknown (None) if selection fails too."""
    try:
        return _selection_fields(program, program.select_for(example), example)
    except Exception:  # noqa: BLE001 - the original failure is what gets reported
        return {"exemplar_ids": [], "within_budget": None}


def run_example(program, example, lm, spec_fields: dict, store, *, selection_only: bool) -> ResultRow:
    """Answer (or, ``selection_only``, select for) ``example``, score it and append its row to ``store``;
    ``spec_fields`` (run key, spec, provenance) are added to the row. Returns the row written."""
    row = example_row(program, example, lm, spec_fields, selection_only=selection_only)
    store.append(row)
    return row


def example_row(program, example, lm, spec_fields: dict, *, selection_only: bool) -> ResultRow:
    """The results row of ``example`` (answered, or selected for, and scored), without writing it: what a worker
    (a thread, a Ray actor) computes and hands to the one writer. Raises nothing but a KeyboardInterrupt."""
    started = time.perf_counter()
    try:
        row = select_example(program, example) if selection_only else answer_example(program, example, lm)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a failure outside the guarded steps below still makes a row
        row = _internal_failure(exc)
    return _with_identity(row, example, spec_fields, time.perf_counter() - started)


def failed_row(example, spec_fields: dict, error: str) -> ResultRow:
    """The row of an example that could not be answered for a reason outside the example (``error_kind``
    ``internal``), e.g. the worker answering it died every time it was tried."""
    row = {"exemplar_ids": [], "within_budget": None, "error": one_line(error), "error_kind": INTERNAL}
    return _with_identity(row, example, spec_fields, None)


def _with_identity(row: dict, example, spec_fields: dict, seconds: float | None) -> ResultRow:
    """The finished row, checked against the schema (``row_schema``: an undeclared field is a bug)."""
    row.update(spec_fields)
    row.update(example_id=example.id, doc_id=example.get("doc_id"),
               latency_s=None if seconds is None else round(seconds, 3))
    return ResultRow.build(row)


def select_example(program, example) -> dict:
    """Selection only: which exemplars, how many tokens, how good (model-free)."""
    try:
        selection = program.select_for(example)
        row = _selection_fields(program, selection, example)
        row["error"] = None
    except Exception as exc:  # noqa: BLE001 - any failure is recorded; the run goes on
        row = _internal_failure(exc)
        if lm_error_kind(exc) == TRANSIENT:  # a model server that did not answer a token count: asked again
            row.update(error=_describe(exc), error_kind=TRANSIENT)
    return row


# What a prediction may say about how it answered: the route it took (routed pipelines), the raw reply of an
# extraction, how its scale was decided (the model's own scale and the rule that chose the answer's), and the
# numbers of a program replaced by the cells its comments name.
_DETAILS = ("route", "routed_answer_type", "p_extract", "raw_answer", "model_scale", "scale_reason", "cell_fixes")


def _answer_details(prediction) -> dict:
    return {key: _jsonable(prediction.get(key)) for key in _DETAILS if prediction.get(key) not in (None, "", [])}


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
    prompts = PromptRecorder()  # the fingerprint of every prompt this example sends
    timer = LMTimer()  # the seconds spent inside its LM calls
    tokens = CallTokens()  # each call's prompt tokens as the provider reported them
    with counting_calls() as calls, observing_calls(tokens):  # this example's calls, cache hits, cost (thread-safe)
        try:
            with dspy.context(lm=lm, track_usage=True, callbacks=[*dspy.settings.callbacks, prompts, timer]):
                prediction = program(**inputs)
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure is recorded; the run goes on
            row = _selection_after_failure(program, example)
            row.update(score_prediction(example, _NO_ANSWER))
            kind = lm_error_kind(exc)
            row.update({"output": None, "answer": None, "error_kind": kind or _failure_kind(exc),
                        "error": _describe(exc) if kind else _exception_line(exc), **_call_fields(calls),
                        "traceback": portable_traceback(traceback.format_exc(limit=3)),  # no path of this machine
                        **prompts.row_fields(), **timer.row_fields(),
                        **tokens.row_fields(prompts.hashes, run_token_counter(program, lm))})
            row.update(prompts.instruction_fields())
            return row
    try:
        row = _answered_row(program, example, prediction, calls, prompts, timer)
        row.update(tokens.row_fields(prompts.hashes, run_token_counter(program, lm)))
        return row
    except Exception as exc:  # noqa: BLE001 - the answer is kept as far as it can be; the run goes on
        row = _internal_failure(exc, "could not record the answer: ")
        row.update(output=_jsonable(getattr(prediction, "program", None)), correct=False,
                   answer=_jsonable(getattr(prediction, "answer", None)), **_call_fields(calls))
        return row


def _call_fields(calls) -> dict:
    """The example's LM traffic (``CallCounts``): real calls, DSPy cache hits, cost, prompt-cache use and, when
    the provider timed its calls, the prefill / decode split."""
    fields = {"lm_calls": calls.calls, "cache_hits": calls.cache_hits, "cost_usd": calls.cost,
              "cached_prompt_tokens": calls.cached_prompt_tokens}
    if calls.cache_write_tokens:
        fields["cache_write_tokens"] = calls.cache_write_tokens
    if calls.replayed:
        fields["replayed"] = calls.replayed
    if calls.timed_calls:
        fields.update(prefill_s=round(calls.prefill_seconds, 3), decode_s=round(calls.decode_seconds, 3))
    return fields


def _answered_row(program, example, prediction, calls, prompts: PromptRecorder, timer: LMTimer) -> dict:
    row = _selection_fields(program, prediction.selection, example) if getattr(prediction, "selection", None) else {
        "exemplar_ids": [], "within_budget": True}
    error = getattr(prediction, "error", None)
    row.update({
        "output": getattr(prediction, "program", None) or getattr(prediction, "reasoning", None),
        "answer": _jsonable(getattr(prediction, "answer", None)),
        "scale": getattr(prediction, "scale", None),
        "error": error,
        "attempts": getattr(prediction, "attempts", None),
        **_call_fields(calls),
    })
    if error:
        row["error_kind"] = ANSWER
    row.update(_answer_details(prediction))
    row.update(prompts.row_fields())
    row.update(prompts.instruction_fields())  # the instructions as sent (a zero-shot prompt's too)
    row.update(timer.row_fields())
    row.update(_usage(prediction))
    if getattr(prediction, "sample_answers", None) is not None:  # self-consistency: what each sample computed
        row.update(sample_answers=_jsonable(prediction.sample_answers), votes=getattr(prediction, "votes", None))
    row.update(score_prediction(example, prediction))
    return row


def _jsonable(value, depth: int = 0):
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, (list, tuple)) and depth < 20:
        return [_jsonable(v, depth + 1) for v in value]
    return str(value)


def _internal_failure(exc: BaseException, prefix: str = "") -> dict:
    """The row of an example that failed for a reason that is neither the LM's nor its answer's."""
    return {"exemplar_ids": [], "within_budget": None, "error": prefix + _exception_line(exc),
            "error_kind": INTERNAL}


def _failure_kind(exc: BaseException) -> str:
    """The kind of a failure that is not the LM call's: the answer's when the LM replied in a form the adapter could
    not parse (DSPy's ``AdapterParseError``, or an exception raised ``from`` one), otherwise ``internal`` (a bug). Only
    explicit causes count (``cause_chain``): a bug in code handling a parse error keeps the parse error as its
    implicit ``__context__``, and is still a bug."""
    return ANSWER if any(isinstance(item, AdapterParseError) for item in cause_chain(exc)) else INTERNAL


def _exception_line(exc: BaseException) -> str:
    return one_line(f"{type(exc).__name__}: {exc}")


def _describe(exc: Exception) -> str:
    try:
        return describe_lm_error(exc)
    except Exception:  # noqa: BLE001 - describing the error must not replace it
        return _exception_line(exc)
