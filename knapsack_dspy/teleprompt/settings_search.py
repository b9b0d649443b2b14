"""Search: the selection settings of one predictor chosen on its validation queries.

Compiling must stay affordable when an LM call takes 10-30 s, so the search is staged: every configuration of the
search space (:func:`search_points`) is fitted once and scored by **model-free proxies** on the validation subset
(the student's own, else ``selection_proxies``), and only the best ``max_lm_configs`` by proxy are evaluated with
the LM (``dspy.Evaluate`` with the metric); the best by LM score, then proxy score, is loaded into the selection.
Each fitted state is kept to be restored instead of fitted again.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import dspy
import numpy as np

from knapsack_dspy.llm.errors import describe_lm_error, lm_error_kind
from knapsack_dspy.modules.compiled_programs import predictor_at
from knapsack_dspy.modules.pool_spec import PoolSpec
from knapsack_dspy.modules.select_exemplars import query_text
from knapsack_dspy.selection.config import SelectionConfig
from knapsack_dspy.selection.selectors import FIT_ON_SCORING_FUNCTION, FIT_ON_VALIDATION_QUERIES
from knapsack_dspy.teleprompt.compile_target import CompileTarget
from knapsack_dspy.teleprompt.errors import CompileError
from knapsack_dspy.teleprompt.query_samples import ValQuery, gold_attributes, query_fields

__all__ = ["REPORTED_SETTINGS", "SearchOutcome", "SettingsSearch", "search_points"]

#: settings every entry of the compile report's "configs" shows
REPORTED_SETTINGS = ("alpha", "beta", "max_exemplars")


def search_points(search_space: Mapping[str, Sequence], base: SelectionConfig) -> list[tuple[dict, SelectionConfig]]:
    """(the point as the report shows it, its config) for every combination of the search space."""
    keys = sorted(search_space)
    out = []
    for values in itertools.product(*(search_space[k] for k in keys)):
        point = {name: getattr(base, name) for name in REPORTED_SETTINGS}
        point.update(zip(keys, values, strict=True))
        try:
            out.append((point, base.with_settings(**dict(zip(keys, values, strict=True)))))
        except ValueError as exc:
            raise CompileError(f"search_space point {point}: {exc}") from None
    return out


@dataclasses.dataclass
class SearchOutcome:
    """The report's entry of every configuration (``config``, ``proxies``, ``lm_score`` when LM-evaluated), the
    index of the one chosen (its state loaded) and where its fitted pool's kinds came from."""

    entries: list[dict]
    chosen: int
    kinds: str


@dataclasses.dataclass(frozen=True)
class SettingsSearch:
    """The staged search (see the module docstring). ``metric``: the LM evaluation's (``None``: proxies only, no
    LM call); ``max_lm_configs``: how many configurations the LM evaluates; ``num_threads``: ``dspy.Evaluate``'s."""

    metric: Callable | None
    max_lm_configs: int
    num_threads: int
    progress: bool

    def run(self, program, target: CompileTarget, spec: PoolSpec, configs: list[tuple[dict, SelectionConfig]], *,
            budget: int, token_model: str | None, prompt_format: str, val_subset: list[ValQuery],
            fit_queries: list[ValQuery]) -> SearchOutcome:
        """Fit ``target``'s selection on the pool ``spec`` with every configuration, score, choose; ``fit_queries``:
        what a selector fitting on queries sees (the validation subset, else the pool as queries)."""
        select, signature = target.select, target.selecting.signature
        # Stage 1: fit every configuration once (no LM calls unless a fixed set is LM-scored) and score it
        # with model-free proxies; keep each fitted state to restore later instead of refitting.
        entries: list[dict] = []
        snapshots, kinds = [], []
        for point, config in configs:
            select.fit(spec, budget=budget, token_model=token_model, config=config,
                       fit_inputs=self.fit_inputs(program, target, config, fit_queries, budget),
                       signature_fields=list(signature.fields), input_fields=list(signature.input_fields),
                       prompt_format=prompt_format, progress=self.progress)
            snapshots.append(select.dump_state())
            kinds.append(select.kinds)  # where the fitted pool's kinds came from (not in the state)
            entry: dict[str, Any] = {"config": point}
            if val_subset:
                entry["proxies"] = self.proxy_scores(target, val_subset)
            entries.append(entry)

        # Stage 2: LM evaluation of the best configurations by proxy.
        ranked = sorted(range(len(configs)), key=lambda i: -entries[i].get("proxies", {}).get("score", 0.0))
        if self.metric is not None and val_subset and len(configs) > 1:
            for i in ranked[: self.max_lm_configs]:
                select.load_state(snapshots[i])
                entries[i]["lm_score"] = self.lm_score(program, [q.example for q in val_subset])
        chosen = max(ranked, key=lambda i: (entries[i].get("lm_score", -math.inf),
                                            entries[i].get("proxies", {}).get("score", 0.0), -ranked.index(i)))
        select.load_state(snapshots[chosen])
        return SearchOutcome(entries, chosen, kinds[chosen])

    def fit_inputs(self, program, target: CompileTarget, config: SelectionConfig, queries: list[ValQuery],
                   budget: int) -> dict:
        """What the selector's ``fit`` needs besides the pool, as its class declares (``fit_on``)."""
        fit_on = config.selector_class.fit_on
        if fit_on is None:
            return {}
        select = target.select
        # A compile-time set must fit typical queries: size it for the 90th percentile of the validation
        # prompts (longer queries drop its least similar exemplars at inference).
        bases = [q.base_tokens for q in queries]
        capacity = config.exemplar_capacity(
            budget - (float(np.percentile(bases, 90)) if any(bases) else 0) - config.reserve_output_tokens)
        if fit_on == FIT_ON_VALIDATION_QUERIES:
            texts = [query_text(q.inputs, config.embed_fields or ()) for q in queries]
            return {"val_embeddings": select.embedder.encode(texts), "capacity": capacity}
        if fit_on == FIT_ON_SCORING_FUNCTION:
            if self.metric is None:
                def score(indices):
                    return _fixed_set_proxy(select, indices, queries)
            else:  # SEER's Fixed set baseline: the best of N random sets by validation accuracy
                def score(indices):
                    probe = program.deepcopy()
                    predictor_at(probe, target.name).selection.show_fixed_set([select.pool_ids[i] for i in indices])
                    return self.lm_score(probe, [q.example for q in queries])
            return {"score_fn": score, "capacity": capacity}
        raise CompileError(f"selector {config.selector!r} declares fit_on={fit_on!r}, which compile cannot provide")

    def proxy_scores(self, target: CompileTarget, val_subset: list[ValQuery]) -> dict:
        """The model-free proxies of the selection as fitted now, over the validation subset: the student's own
        (``ScoresSelections``), else ``selection_proxies``."""
        select, functions = target.select, target.attribute_functions
        rows = []
        for q in val_subset:
            pred = select(base_tokens=q.base_tokens, id=q.example.get("id"), doc_id=q.example.get("doc_id"),
                          attribute_fields=query_fields(q.example), **q.inputs,
                          **gold_attributes(select, q.example, functions))
            rows.append((q.example, pred.selection))
        if target.proxies is not None:  # the student's own
            return dict(target.proxies(rows, select))
        from knapsack_dspy.teleprompt.selection_proxies import selection_proxies

        return selection_proxies(rows, select, attributes=select.config.attributes)

    def lm_score(self, program, examples) -> float:
        """The metric's score of ``program`` on ``examples``. ``dspy.Evaluate`` counts an example whose LM
        call failed as a zero and goes on; a score built on questions that were never asked would steer the
        search, so an LM failure (after DSPy's retries) stops the compile with a :class:`CompileError` that
        says what failed and what to do."""
        failures: list[BaseException] = []

        def asked(**inputs):
            if failures:  # the LM failed (after DSPy's retries): ask nothing more, the compile stops below
                return dspy.Prediction()
            try:
                return program(**inputs)
            except Exception as exc:
                if lm_error_kind(exc) is None:
                    raise
                failures.append(exc)
                return dspy.Prediction()

        evaluate = dspy.Evaluate(devset=examples, metric=self.metric, num_threads=self.num_threads,
                                 display_progress=self.progress, provide_traceback=False)
        score = float(evaluate(asked).score)
        if failures:
            raise CompileError(f"the LM failed while the search scored a configuration on {len(examples)} "
                               f"validation questions: {describe_lm_error(failures[0])}")
        return score


def _fixed_set_proxy(select, indices, queries: list[ValQuery]) -> float:
    """Mean similarity of a candidate fixed set to the validation queries (model-free)."""
    if not indices:
        return 0.0
    pool = select.pool()
    q = select.embedder.encode([select.query_text(v.inputs) for v in queries])
    return float((pool.embeddings[list(indices)] @ q.T).mean())
