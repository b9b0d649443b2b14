"""The order a run answers its questions in, chosen so that consecutive prompts share long prefixes.

A server's prompt cache (the embedded model's llama.cpp slot, a provider's automatic prefix caching) reuses the
longest prefix a prompt shares with the one before it: the system message, then the demos in order, then the
question's own document. Selection is deterministic and needs no LM, so before answering, the bench selects for
every question (``program.select_for``) and orders them:

1. by the program's ``prompt_group(example)`` (a routed pipeline: the route, whose instructions open the
   prompt), groups in order of first appearance in the split;
2. within a group, greedily: after a question comes the one whose prompt shares the most leading elements with
   it -- its demo ids in prompt order, then its document -- ties going to the split's order (so questions of one
   document stay adjacent).

Rows are still written and reported per question; answers do not depend on the order (the LM cache key is the
prompt), only the time does. ``benchmarks/prefix_reuse.py`` counts the prompt tokens this reuses, LM-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["cache_friendly_order", "greedy_prefix_chain", "shared_prefix_length"]


def shared_prefix_length(a: Sequence, b: Sequence) -> int:
    """How many leading elements ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def greedy_prefix_chain(keys: Sequence[Sequence]) -> list[int]:
    """Positions of ``keys`` in a chain that starts with the first and always continues with the remaining key
    sharing the longest prefix with the last one taken (ties: the earliest position)."""
    if not keys:
        return []
    remaining = list(range(1, len(keys)))
    chain = [0]
    while remaining:
        last = keys[chain[-1]]
        best = max(remaining, key=lambda k: (shared_prefix_length(last, keys[k]), -k))
        chain.append(best)
        remaining.remove(best)
    return chain


def _prompt_key(program, example) -> tuple:
    """What a question's prompt opens with: its demo ids in order, then its document (empty when selection
    fails: the example is then simply placed by the split's order)."""
    try:
        ids = tuple(program.select_for(example).get("ids", ()))
    except Exception:  # noqa: BLE001 - ordering is an optimisation: the example's own run reports the failure
        return ()
    return (*ids, ("document", str(example.get("doc_id") or "")))


def cache_friendly_order(program, examples: list, key: Callable | None = None) -> list:
    """``examples`` ordered for prefix reuse (see the module docstring). ``key(example)``: what a prompt opens
    with (default: the program's selection, then the document); programs without ``prompt_group`` form one
    group, programs without ``select_for`` keep the split's order within a group."""
    examples = list(examples)
    group = getattr(program, "prompt_group", None)
    groups: dict = {}
    for example in examples:
        groups.setdefault(group(example) if callable(group) else "", []).append(example)
    if key is None:
        if not callable(getattr(program, "select_for", None)):
            return [ex for members in groups.values() for ex in members]
        key = lambda example: _prompt_key(program, example)  # noqa: E731
    ordered = []
    for members in groups.values():
        keys = [key(example) for example in members]
        ordered += [members[k] for k in greedy_prefix_chain(keys)]
    return ordered
