"""The per-question page's data: one JSON object, built by a pure function from what a results directory holds.

``build_page_data`` turns the rows, the report (tables, plots) and what was looked up for them (the questions'
text and gold attributes, the exemplars' questions and demos, re-rendered prompts) into the object the page
embeds and renders (``bench.reporting.html_page``). It reads no file and calls no model, so it is tested without a
browser. Shape (version 1)::

    {"version", "title", "generated", "notes": [...], "runs": [{"run", "label", "name", "setting",
     "selection_only", "n"}], "tables": [{"title", "header", "rows", "note", "setting", "kind"}],
     "plots": [{"name", "src"}], "not_drawn": [{"name", "reason"}], "answer_types": [...],
     "exemplars": {key: {"id", "question", "shows": {field: text}, "source"}},
     "questions": [{"key", "id", "doc_id", "dataset", "question", "answer_type", "modality", "gold", "gold_scale",
                    "derivation", "verdicts": {run: true|false|null}, "disagree", "cells": {run: {...}}}]}

A cell (one run's answer to one question): ``answer``, ``scale``, ``verdict`` (right / wrong; for
selection-only runs the gold-case hit), ``em``, ``f1``, ``exemplars`` (keys into ``exemplars``, prompt order),
``output`` (the program or reasoning), ``prompt_tokens`` (counted at selection), ``prompt_tokens_used``
(reported by the LM), ``within_budget``, ``route``, ``error`` and ``error_kind``, ``lm_calls``, ``attempts``,
``prompt`` (``bench.results.prompt_rendering.PromptCheck`` as a dict, or None for selection-only rows), ``demos_note``
(rows without a prompt fingerprint: the demos shown cannot be checked against what the prompt held).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from knapsack_dspy.bench.reporting.report_tables import Table, setting_title
from knapsack_dspy.bench.results.prompt_rendering import row_prompt_status
from knapsack_dspy.bench.results.question_facts import QuestionFacts, facts_key
from knapsack_dspy.bench.results.row_outcomes import error_kind
from knapsack_dspy.bench.results.row_schema import ResultRow, rows_of
from knapsack_dspy.bench.scoring.run_metrics import setting_of
from knapsack_dspy.saved_format import PAGE_DATA_VERSION

__all__ = ["PAGE_DATA_VERSION", "build_page_data"]

MAX_TEXT_CHARS = 6000  # of one answer, output or error shown (a runaway reply stays readable)
_CELL_FIELDS = (ResultRow.scale, ResultRow.em, ResultRow.f1, ResultRow.prompt_tokens, ResultRow.prompt_tokens_used,
                ResultRow.within_budget, ResultRow.route, ResultRow.routed_answer_type, ResultRow.lm_calls,
                ResultRow.attempts, ResultRow.selection_ms, ResultRow.latency_s, ResultRow.lm_seconds)


def _clip(value):
    """Text clipped to ``MAX_TEXT_CHARS``; lists item by item; other JSON values as they are."""
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT_CHARS else value[:MAX_TEXT_CHARS] + " …"
    if isinstance(value, list):
        return [_clip(v) for v in value[:200]]
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return _clip(str(value))


def _verdict(row: ResultRow) -> bool | None:
    """Right or wrong (the gold-case hit of a selection-only row; None when the row says neither)."""
    if row.spec.get("selection_only"):
        hit = row.gold_case_hit
        return None if hit is None else bool(hit)
    return bool(row.correct)


def _cell(row: ResultRow, exemplar_keys: list[str], prompt: dict | None) -> dict:
    cell = {field.name: field.of(row) for field in _CELL_FIELDS if field.of(row) is not None}
    cell.update(answer=_clip(row.answer), verdict=_verdict(row), exemplars=exemplar_keys,
                output=_clip(row.output), error=_clip(row.error), error_kind=error_kind(row))
    if row.spec.get("selection_only"):
        cell["prompt"] = None
    else:
        cell["prompt"] = prompt if prompt is not None else row_prompt_status(row).to_dict()
        if not row.prompt_sha256 and exemplar_keys:
            cell["demos_note"] = ("this row predates prompt fingerprints: these are the exemplars it chose, but how "
                                  "its prompt showed them cannot be checked")
    return cell


def _runs(metrics: Mapping[str, dict]) -> list[dict]:
    several = len({setting_of(m["spec"]) for m in metrics.values()}) > 1
    out = []
    for m in sorted(metrics.values(), key=lambda m: (str(setting_of(m["spec"])), str(m.get("label")))):
        setting = setting_title(setting_of(m["spec"]))
        out.append({"run": m["run"], "label": str(m.get("label")),
                    "name": f"{m.get('label')} · {setting}" if several else str(m.get("label")),
                    "setting": setting, "selection_only": bool(m["spec"].get("selection_only")), "n": m["n"]})
    return out


def build_page_data(rows: Iterable[Mapping], metrics: Mapping[str, dict], tables: list[Table], *, title: str,
                    generated: str = "", facts: QuestionFacts | None = None,
                    exemplars: Mapping[str, dict] | None = None,
                    exemplars_of_row: Mapping[tuple[str, str], list[str]] | None = None,
                    prompts: Mapping[tuple[str, str], dict] | None = None, plots: list[dict] | None = None,
                    not_drawn: Mapping[str, str] | None = None, notes: list[str] | None = None) -> dict:
    """The page's data (see the module docstring). ``prompts``: re-rendered prompt checks by (run, example id)
    (``PromptCheck.to_dict()``); rows without one carry their fingerprint status. ``plots``: ``{"name", "src"}``
    with ``src`` a data URI."""
    facts, exemplars_of_row, prompts = facts or {}, exemplars_of_row or {}, prompts or {}
    questions: dict[tuple[str, str], dict] = {}
    for row in rows_of(rows):
        qkey = facts_key(row)
        fact = facts.get(qkey, {})
        question = questions.get(qkey)
        if question is None:
            question = questions[qkey] = {
                "key": f"{qkey[0]}:{qkey[1]}", "id": qkey[1], "doc_id": row.doc_id, "dataset": qkey[0],
                "question": fact.get("question"), "answer_type": fact.get("answer_type"),
                "modality": fact.get("modality"), "gold": _clip(row.gold), "gold_scale": row.gold_scale,
                "derivation": _clip(fact.get("derivation") or fact.get("program")), "cells": {}}
        if question["gold"] is None and row.gold is not None:
            question["gold"], question["gold_scale"] = _clip(row.gold), row.gold_scale
        ids = (row.run, qkey[1])
        question["cells"][row.run] = _cell(row, list(exemplars_of_row.get(ids, [])), prompts.get(ids))
    for question in questions.values():
        verdicts = {run: cell["verdict"] for run, cell in question["cells"].items()}
        question["verdicts"] = verdicts
        question["disagree"] = len({v for v in verdicts.values() if v is not None}) > 1
    # the eval split's order (the facts are read in it): rows come in the order they were answered, which the
    # bench chooses for prompt-cache reuse (grouped by route)
    position = {key: i for i, key in enumerate(facts)}
    ordered = sorted(questions.items(), key=lambda item: position.get(item[0], len(position)))
    questions = dict(ordered)
    used = {key for q in questions.values() for cell in q["cells"].values() for key in cell["exemplars"]}
    return {
        "version": PAGE_DATA_VERSION, "title": title, "generated": generated, "notes": list(notes or []),
        "runs": _runs(metrics), "tables": [t.to_dict() for t in tables], "plots": list(plots or []),
        "not_drawn": [{"name": n, "reason": r} for n, r in (not_drawn or {}).items()],
        "answer_types": sorted({q["answer_type"] for q in questions.values() if q["answer_type"]}),
        "exemplars": {k: v for k, v in (exemplars or {}).items() if k in used},
        "questions": list(questions.values()),
    }
