"""Model-free proxies of one selection configuration, on validation queries, without LM calls.

``KnapsackFewShot`` ranks its (alpha, beta, M, ...) configurations by ``score`` before spending LM calls. These
are the proxies any program gets: the share of prompts within the budget, the mean number of exemplars and, for
each constrained attribute with a known value on the query, the share of exemplars with the query's value;
``score = within_budget * mean(attribute matches)`` (1 without any). A student program may rank by its own
(``compile_hooks.ScoresSelections``: the document-QA pipelines add the similarity of the exemplars' programs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

__all__ = ["attribute_match", "selection_proxies"]


def attribute_match(select, example: Mapping, exemplar_ids: Sequence[str], attribute: str) -> float | None:
    """The share of the chosen exemplars whose ``attribute`` equals the query's; ``None`` when the query has no
    value or nothing was chosen."""
    wanted = example.get(attribute)
    if not wanted or not exemplar_ids:
        return None
    labels = select.pool_attributes.get(attribute)
    index = {pid: i for i, pid in enumerate(select.pool_ids)}
    rows = [index[pid] for pid in exemplar_ids if pid in index]
    if not rows:
        return None
    return sum((labels[i] if labels is not None else None) == wanted for i in rows) / len(rows)


def selection_proxies(rows: Sequence[tuple], select, attributes: Sequence[str] = ()) -> dict:
    """``rows``: (validation example, the selection info ``SelectExemplars`` returned) pairs."""
    if not rows:
        return {"score": 0.0, "n": 0}
    out = {"n": len(rows), "within_budget": float(np.mean([bool(info["within_budget"]) for _, info in rows])),
           "mean_exemplars": float(np.mean([len(info["ids"]) for _, info in rows]))}
    quality = []
    for attr in attributes:
        matches = [m for ex, info in rows if (m := attribute_match(select, ex, info["ids"], attr)) is not None]
        if matches:
            out[f"attribute_match.{attr}"] = float(np.mean(matches))
            quality.append(out[f"attribute_match.{attr}"])
    out["score"] = out["within_budget"] * (float(np.mean(quality)) if quality else 1.0)
    return out
