"""Model-free proxies for a selection configuration, computed on validation queries without LM calls.

Used by ``KnapsackFewShot`` to rank (alpha, beta, M) configurations before spending LM calls, and by the
bench for its selection-quality columns. Per query (``knapsack_dspy.docqa.metrics.selection_quality.score_query``):
attribute match of the chosen exemplars with the query's gold attributes, and — when programs /
derivations are known — the best program similarity (CBR paper) and a gold-case hit (>= 0.9).
Over a validation set: ``within_budget`` share, means of those, and
``score = within_budget * mean(available quality terms)``, the number configs are ranked by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from knapsack_dspy.docqa.metrics.selection_quality import score_query

#: the attributes whose match the bench records for a query's exemplars (``attribute_match``)
ATTRIBUTES = ("modality", "answer_type")


@dataclass
class PoolView:
    """What the selection-quality scores read about a pool (as ``SelectExemplars`` holds it): for a program that
    selects its demos otherwise (DSPy's optimizers in the bench)."""

    pool_ids: list[str]
    programs: list[str]
    pool_attributes: dict[str, list[str]] = field(default_factory=dict)


def pool_view(pool: Sequence, attributes: Sequence[str]) -> PoolView:
    """The pool's ids, gold programs (or derivations) and the values of ``attributes`` and :data:`ATTRIBUTES`."""
    view = PoolView([str(ex.get("id", i)) for i, ex in enumerate(pool)],
                    [str(ex.get("program") or ex.get("derivation") or "") for ex in pool])
    for attr in {*attributes, *ATTRIBUTES}:
        values = [ex.get(attr) for ex in pool]
        if any(v not in (None, "") for v in values):
            view.pool_attributes[attr] = ["" if v is None else str(v) for v in values]
    return view


def query_selection_scores(select, example, exemplar_ids: Sequence[str],
                           attributes: Sequence[str] = ATTRIBUTES) -> dict[str, Any]:
    """``gold_case_hit``, ``program_score`` (best) and ``attribute_match`` (attribute -> the share of the exemplars
    with the query's gold value; the attributes the query has a value of) for one query's choice."""
    index = {pid: i for i, pid in enumerate(select.pool_ids)}
    attrs = [a for a in attributes if example.get(a)]
    exemplars = []
    for pid in exemplar_ids:
        i = index.get(pid)
        if i is None:
            continue
        exemplars.append({"id": pid, "program": select.programs[i] if select.programs else None,
                          "attributes": {a: select.pool_attributes.get(a, [""] * len(index))[i] for a in attrs}})
    query = {"query_id": example.get("id"), "gold_program": example.get("program") or example.get("derivation"),
             "attributes": {a: example.get(a) for a in attrs}, "exemplars": exemplars}
    try:
        scores = score_query(query)
    except (TypeError, ValueError):
        return {}
    out: dict[str, Any] = {}
    if scores.gold_case_hit is not None:
        out["gold_case_hit"] = bool(scores.gold_case_hit)
        out["program_score"] = scores.best_program_score
    if scores.attribute_match:
        out["attribute_match"] = dict(scores.attribute_match)
    return out


def selection_proxies(rows: Sequence[tuple], select, attributes: Sequence[str] = ("modality",)) -> dict:
    """``rows``: (validation example, selection info dict from SelectExemplars) pairs."""
    if not rows:
        return {"score": 0.0, "n": 0}
    per_query = [query_selection_scores(select, ex, info["ids"], attributes) for ex, info in rows]
    out = {"n": len(rows), "within_budget": float(np.mean([bool(info["within_budget"]) for _, info in rows])),
           "mean_exemplars": float(np.mean([len(info["ids"]) for _, info in rows]))}
    quality = []
    for attr in attributes:
        vals = [q["attribute_match"][attr] for q in per_query if attr in q.get("attribute_match", {})]
        if vals:
            out[f"attribute_match.{attr}"] = float(np.mean(vals))
            quality.append(out[f"attribute_match.{attr}"])
    best = [q["program_score"] for q in per_query if q.get("program_score") is not None]
    if best:
        out["program_score"] = float(np.mean(best))
        out["gold_case_hit"] = float(np.mean([q["gold_case_hit"] for q in per_query if "gold_case_hit" in q]))
        quality.append(out["program_score"])
    out["score"] = out["within_budget"] * (float(np.mean(quality)) if quality else 1.0)
    return out
