"""Why a call sends no exemplar, with the numbers (the selection info's ``reason``; ``KnapsackFewShot``'s
zero-shot diagnostics). Loaded when a selection comes back empty, not with the module."""

from __future__ import annotations

from knapsack_dspy.selection.exemplar_pool import ExemplarPool, SelectionRequest, eligible_mask


def empty_reason(pool: ExemplarPool, request: SelectionRequest, *, budget: int, base_tokens: int,
                 reserve_output_tokens: int, latency_budget: float | None, reason: str) -> str:
    """Why ``request`` selects nothing from ``pool``: the budget arithmetic when no eligible exemplar fits (the
    prompt ``budget``, the query prompt's ``base_tokens`` without demos, the output reserve, the latency
    budget), else the selector's own ``reason`` (e.g. no exemplar of positive value)."""
    mask = eligible_mask(pool, request)
    if not mask.any():
        return "empty selection: no eligible exemplar (every pool exemplar is the query itself, excluded or " \
               "from the query's document)"
    cheapest = float(pool.alone_costs()[mask].min())
    capacity = request.capacity
    if cheapest <= min(capacity, request.new_token_capacity) + 1e-9:
        return reason
    if capacity < cheapest:
        left = budget - base_tokens - reserve_output_tokens
        if left > capacity:  # the exemplar budget binds
            return (f"empty selection: no exemplar fits the exemplar budget of {capacity:g} tokens; the "
                    f"cheapest costs {cheapest:g}")
        return (f"empty selection: no exemplar fits: budget {budget} - prompt without demos "
                f"{base_tokens} - output reserve {reserve_output_tokens} = {capacity:g} tokens for exemplars; the "
                f"cheapest costs {cheapest:g}")
    return (f"empty selection: no exemplar fits the latency budget ({latency_budget:g} s leaves "
            f"{request.new_token_capacity:g} new prompt tokens; the cheapest exemplar costs {cheapest:g})")
