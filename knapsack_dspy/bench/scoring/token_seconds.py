"""What a run's answers cost in prompt tokens and seconds (``metrics.json``'s ``tokens_seconds``; report.md's
"Tokens and seconds per question").

Per run, from what its rows record -- never filled in where they do not:

- ``prompt_tokens``: the prompt's tokens as selection measured them (question + demos; every row with a
  selection, selection-only runs too), mean with a 90 % bootstrap interval of the mean, and median;
- ``tokens_after_instructions``: of those, the tokens after the instructions (``prompt_tokens -
  instruction_tokens``: the demos, the question and its evidence), over the rows that record it;
- ``demos``: the demos per prompt (the selected exemplars), over the rows with a selection;
- ``pieces_kept`` / ``pieces_offered``: with selectable evidence, the pieces per prompt and the pieces offered;
- ``lm_prompt_tokens``: the prompt tokens the LM reported per question (``prompt_tokens_used``: every call of the
  question, a repair turn included), over the rows that asked the LM;
- ``new_prompt_tokens``: of those, the tokens new to the prompt cache (``prompt_tokens_used`` -
  ``cached_prompt_tokens``), only where the provider says what its cache served -- the embedded models
  (llama.cpp reports its reuse with its timings) or any provider that reported a cached token in the run; a
  provider that reports nothing would make every token look new;
- ``prefill_s`` / ``decode_s``: seconds of prompt processing and of generation per question (the embedded models'
  timings), mean and median;
- ``right_per_1k_prompt_tokens``: right answers per 1,000 prompt tokens (selection-measured), over the rows
  that record both (runs with answers).

Rows that did not ask the LM (answered from the LM cache or replayed from an earlier run) have no LM figures and
are left out of them; ``n_asked`` says how many rows the LM figures are over. A figure no row records is
``None`` (blank in the report): rows written before a field existed, selection-only runs, providers without
timings.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable

from knapsack_dspy.bench.results.row_schema import ResultRow, rows_of
from knapsack_dspy.docqa.metrics.intervals import bootstrap_ci

__all__ = ["TOKEN_SECONDS_LEVEL", "tokens_and_seconds"]

TOKEN_SECONDS_LEVEL = 0.9


def _summary(values: list[float], interval: bool = False) -> dict | None:
    """``{"mean", "median", "n"}`` (and ``"ci"``: the mean's 90 % bootstrap interval); ``None`` for no values."""
    if not values:
        return None
    out = {"mean": statistics.fmean(values), "median": float(statistics.median(values)), "n": len(values)}
    if interval:
        low, high = bootstrap_ci(values, level=TOKEN_SECONDS_LEVEL, resamples=1000, seed=0)[:2]
        out["ci"] = [float(low), float(high)]
    return out


def _reports_cache(asked: list[ResultRow]) -> bool:
    """Whether the rows' provider says what its prompt cache served (a 0 from one that does not is no figure)."""
    return any(r.prefill_s is not None for r in asked) or any((r.cached_prompt_tokens or 0) > 0 for r in asked)


def tokens_and_seconds(rows: Iterable, selection_only: bool = False) -> dict:
    """The run's token and time figures (see the module docstring) from its rows."""
    items = rows_of(rows)
    out: dict = {"n": len(items)}
    measured = [r for r in items if r.prompt_tokens is not None]
    out["prompt_tokens"] = _summary([float(r.prompt_tokens) for r in measured], interval=True)
    out["tokens_after_instructions"] = _summary([float(r.tokens_after_instructions) for r in measured
                                                 if r.tokens_after_instructions is not None], interval=True)
    out["demos"] = _summary([float(len(r.exemplar_ids)) for r in measured])
    out["pieces_kept"] = _summary([float(r.pieces_kept) for r in items if r.pieces_kept is not None])
    out["pieces_offered"] = _summary([float(r.pieces_offered) for r in items if r.pieces_offered is not None])
    asked = [] if selection_only else [r for r in items if (r.lm_calls or 0) > 0]
    out["n_asked"] = len(asked)
    out["lm_prompt_tokens"] = _summary([float(r.prompt_tokens_used) for r in asked if r.prompt_tokens_used])
    new = []
    if _reports_cache(asked):
        new = [float(r.prompt_tokens_used - r.cached_prompt_tokens) for r in asked
               if r.prompt_tokens_used and r.cached_prompt_tokens is not None]
    out["new_prompt_tokens"] = _summary(new)
    out["prefill_s"] = _summary([float(r.prefill_s) for r in asked if r.prefill_s is not None])
    out["decode_s"] = _summary([float(r.decode_s) for r in asked if r.decode_s is not None])
    scored = [] if selection_only else [r for r in measured if r.correct is not None]
    tokens = sum(float(r.prompt_tokens) for r in scored)
    out["right_per_1k_prompt_tokens"] = (1000.0 * sum(bool(r.correct) for r in scored) / tokens
                                         if scored and tokens > 0 else None)
    return out
