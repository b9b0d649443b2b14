"""One call's demos and evidence pieces chosen together (``SelectExemplars.forward`` with ``evidence=``): the pieces'
values read from the query, the choice (``selection/evidence_knapsack.py``), the real prompt measured and repaired,
and the selection info. Loaded when a call first offers pieces.

- **Values**: each piece's relevance is the cosine similarity of its text's embedding (the selection's embedder) to
  the query's, clipped at 0; the query is the text the selection embeds less the selectable fields (a RAG program
  embedding ``context`` and ``question`` reads the question), or all of it when nothing else is embedded; the query's
  terms (``selection/query_terms.py``) come from the same text, and a piece covers a term its text or its fixed
  part contains.
- **The choice**: ``SelectionConfig.evidence`` -- ``"joint"`` when the selector exposes its knapsack
  (``knapsack_problem``), else the demos first (``evidence_mode`` says ``"sequential_fallback"`` and
  ``evidence_note`` why); ``evidence_solver``; ``evidence_weight``; ``evidence_budget``; the exemplar budget caps the
  demos. Under a latency budget every demo and piece counts as new prompt tokens.
- **The repair**: piece costs are measured one at a time and are only approximately additive, so the prompt with the
  chosen demos and pieces is measured (the predictor's ``measure``); while it exceeds the budget (less the output
  reserve) the chosen item of the lowest value per token is dropped and the prompt measured again (at most as many
  rounds as items; ``repaired``: how many were dropped).
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import dspy
import numpy as np

from knapsack_dspy.modules.selectable_context import EvidenceOffer
from knapsack_dspy.modules.shared_fields import referring_demo
from knapsack_dspy.selection.evidence_knapsack import (
    EvidenceChoice,
    EvidencePieces,
    choose_jointly,
    choose_sequentially,
    least_worth_per_token,
    without_demo,
)
from knapsack_dspy.selection.exemplar_pool import ExemplarPool, Selection, SelectionRequest, in_canonical_order
from knapsack_dspy.selection.query_terms import cover_matrix, query_terms

__all__ = ["select_with_evidence"]


def select_with_evidence(select, pool: ExemplarPool, selector, request: SelectionRequest, offer: EvidenceOffer, *,
                         query: str, budget: int, capacity: float, base_tokens: int, shared_tokens: int, latency,
                         canonical_keys: np.ndarray | None, start: float) -> dspy.Prediction:
    """``SelectExemplars.forward``'s answer for a call offering pieces (see the module docstring): the prediction's
    ``demos``, ``ids``, ``pieces`` (``{field: kept indices}``) and ``selection`` (the info). ``select``: the
    ``SelectExemplars``; ``query``: the text the pieces' values are read from; ``budget``: its resolved token budget;
    ``canonical_keys``: the pool's canonical demo order when the config asks for it."""
    config = select.config
    names = list(offer.fields)
    offsets = np.cumsum([0, *(len(offer.fields[name]) for name in names)])
    if latency is not None and config.latency_budget is not None:  # every demo and piece is a new token
        capacity = min(capacity, request.new_token_capacity)
        request = replace(request, new_token_capacity=math.inf)
    exemplar_budget = math.inf if config.exemplar_budget is None else float(config.exemplar_budget)
    evidence_budget = math.inf if config.evidence_budget is None else float(config.evidence_budget)
    budgets = {"capacity": float(capacity), "exemplar_budget": exemplar_budget, "evidence_budget": evidence_budget,
               "solver": config.evidence_solver}
    problem = selector.knapsack_problem(pool, replace(request, capacity=min(capacity, exemplar_budget)))
    pieces = _evidence_pieces(select, offer, names, query, request,
                              price=0.0 if problem is None else float(problem.token_price))
    note = ""
    if config.evidence == "joint" and problem is not None:
        choice = choose_jointly(pool, request, problem, pieces, **budgets)
    else:
        if config.evidence == "joint":
            note = f"selector {config.selector!r} exposes no knapsack problem: its demos first, then the pieces"
        choice = choose_sequentially(pool, request, selector, pieces, by_relevance=config.evidence == "relevance",
                                     problem=problem, **budgets)
    selection = choice.selection
    if canonical_keys is not None:
        selection = in_canonical_order(pool, selection, canonical_keys)
    kept = list(choice.pieces)
    limit = int(budget) - config.reserve_output_tokens
    repaired = 0
    measured = offer.measure(_demos(select, selection), _by_field(kept, names, offsets))
    while measured > limit:  # at most one round per item chosen
        drop = least_worth_per_token(pool, request, problem, pieces, selection.indices, kept)
        if drop is None:
            break
        side, index = drop
        if side == "demo":
            selection = without_demo(pool, selection, index)
        else:
            kept.remove(index)
        repaired += 1
        measured = offer.measure(_demos(select, selection), _by_field(kept, names, offsets))
    demo_value = (None if problem is None else
                  problem.objective(problem.positions(selection.indices)))
    info = _info(select, selector, pool, request, selection, choice, pieces, kept, names, offsets, offer, note=note,
                 demo_value=demo_value, measured=int(measured), repaired=repaired, capacity=capacity,
                 base_tokens=base_tokens, limit=limit)
    if latency is not None:
        shared = int(shared_tokens) + pool.cost_of(selection.indices[: selection.shared_prefix])
        info["new_prompt_tokens"] = int(info["prompt_tokens"] - shared)
        info["predicted_latency_s"] = round(latency.seconds(info["new_prompt_tokens"]), 3)
    if config.latency_budget is not None:
        info["latency_budget"] = config.latency_budget
    info["selection_ms"] = (time.perf_counter() - start) * 1e3
    return dspy.Prediction(demos=_demos(select, selection), ids=info["ids"], selection=info,
                           pieces=_by_field(kept, names, offsets))


def _evidence_pieces(select, offer: EvidenceOffer, names: list[str], text: str, request: SelectionRequest, *,
                     price: float) -> EvidencePieces:
    """Every selectable field's pieces as knapsack items: measured costs, relevance to the query ``text``, the
    query's terms each covers, the fixed parts as groups (``price``: the selector's token price)."""
    query = request.embedding if text == request.key else select.embedder.encode([text])[0]
    texts: list[str] = []
    covered: list[str] = []
    costs: list[float] = []
    needs: list[int] = []
    fixed_costs: list[float] = []
    for name in names:
        pieces, measured = offer.fields[name], offer.costs[name]
        texts += list(pieces.texts)
        covered += [pieces.text_with_fixed(i) for i in range(len(pieces))]
        costs += [float(c) for c in measured.own]
        needs += [k + len(fixed_costs) if k >= 0 else -1 for k in pieces.needs]
        fixed_costs += [float(c) for c in measured.fixed]
    vectors = np.asarray(select.embedder.encode(texts), dtype=float)
    query = np.asarray(query, dtype=float)
    norms = np.linalg.norm(vectors, axis=1) * (np.linalg.norm(query) or 1.0)
    relevance = np.clip((vectors @ query) / np.where(norms > 0, norms, 1.0), 0.0, None)
    return EvidencePieces(np.asarray(costs), relevance, np.asarray(needs, dtype=int), np.asarray(fixed_costs),
                          cover_matrix(query_terms(text), covered), weight=float(select.config.evidence_weight),
                          price=price)


def _by_field(kept, names: list[str], offsets: np.ndarray) -> dict[str, list[int]]:
    """Global piece indices as ``{field: its own indices, ascending}``."""
    out: dict[str, list[int]] = {name: [] for name in names}
    for k in sorted(kept):
        f = int(np.searchsorted(offsets, k, side="right")) - 1
        out[names[f]].append(int(k - offsets[f]))
    return out


def _demos(select, selection: Selection) -> list[dspy.Example]:
    shared = select.config.shared_fields or ()
    return [dspy.Example(**(referring_demo(select.demos[i], shared) if refers else select.demos[i]))
            for i, refers in zip(selection.indices, selection.shared or [False] * len(selection.indices),
                                 strict=True)]


def _info(select, selector, pool: ExemplarPool, request: SelectionRequest, selection: Selection,
          choice: EvidenceChoice, pieces: EvidencePieces, kept, names, offsets, offer: EvidenceOffer, *, note: str,
          demo_value, measured: int, repaired: int, capacity: float, base_tokens: int, limit: int) -> dict[str, Any]:
    """The selection info of a call with pieces (``docs/core.md``, "Selectable context")."""
    config = select.config
    info = selection.as_dict(pool)
    by_field = _by_field(kept, names, offsets)
    evidence_tokens = pieces.tokens(kept)
    within = measured <= limit and (config.exemplar_budget is None or selection.total_cost <= config.exemplar_budget
                                    + 1e-9) and (config.evidence_budget is None
                                                 or evidence_tokens <= config.evidence_budget + 1e-9)
    if not selection.indices and selector.selects_demos and config.max_exemplars > 0 and not info["reason"]:
        info["reason"] = "no demo: the budget went to the evidence pieces, or no demo is worth its tokens beside them"
    info.update(capacity=capacity, base_tokens=int(base_tokens), budget=select.resolved_budget,
                predicted_attributes=dict(request.target_attributes), prompt_tokens=int(measured),
                within_budget=bool(within), evidence_mode=choice.mode if not note else "sequential_fallback",
                pieces=by_field,
                piece_tokens={name: [float(pieces.costs[offsets[f] + i]) for i in by_field[name]]
                              for f, name in enumerate(names)},
                evidence_tokens=float(evidence_tokens), pieces_kept=len(kept), pieces_offered=len(pieces),
                evidence_value=pieces.value(kept), demo_value=demo_value, repaired=repaired,
                evidence_status=choice.status if not repaired else "repaired")
    if choice.relaxed:
        info["evidence_relaxed"] = list(choice.relaxed)
    if note:
        info["evidence_note"] = note
    if offer.instruction_tokens is not None:
        info["instruction_tokens"] = int(offer.instruction_tokens)
    if config.exemplar_budget is not None:
        info["exemplar_budget"] = config.exemplar_budget
    if config.evidence_budget is not None:
        info["evidence_budget"] = config.evidence_budget
    return info
