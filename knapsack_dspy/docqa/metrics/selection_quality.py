"""Model-free quality of exemplar selections: rank selector configurations before spending LM calls.

Input, one :class:`QuerySelection` per query (or a plain dict with the same keys, see
:meth:`QuerySelection.from_dict`): the query's gold program (FinQA) or derivation (TAT-QA) and attributes
(``{"modality": "table", "answer_type": "arithmetic"}``), the chosen exemplars (each with its program and
attributes), and the prompt's token total with its budget.

Per query:

- ``program_scores``: for each chosen exemplar,
  :func:`~knapsack_dspy.docqa.metrics.program_similarity.program_similarity` of its program to the query's gold
  program; an exemplar without a (parseable) program scores 0. Only queries with a parseable gold program take
  part in the program metrics.
- ``best_program_score`` = max of those (0 when nothing was chosen); ``gold_case_hit`` = best >= 0.9;
  ``mean_program_score`` = their mean (0 when nothing was chosen).
- ``attribute_match[attr]``: share of the chosen exemplars whose attribute equals the query's (queries with
  a known attribute value and at least one exemplar).
- ``within_budget``: ``prompt_tokens <= budget`` (or the explicit flag); queries without either are left out.

Aggregates (:class:`SelectionQuality`, each an :class:`~knapsack_dspy.docqa.metrics.intervals.Estimate` with a
90 % interval): ``gold_case_hit_rate`` and ``within_budget_rate`` (proportions, Wilson);
``mean_best_program_score``, ``mean_program_score``, ``attribute_match_rate[attr]`` (means over queries,
seeded bootstrap) and ``mean_exemplars`` (bootstrap).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from knapsack_dspy.docqa.metrics.intervals import DEFAULT_LEVEL, Estimate, mean_estimate, proportion_estimate
from knapsack_dspy.docqa.metrics.program_similarity import GOLD_CASE_THRESHOLD, program_similarity, to_steps

__all__ = [
    "QueryScores",
    "QuerySelection",
    "SelectedExemplar",
    "SelectionQuality",
    "program_parses",
    "program_score",
    "score_query",
    "selection_quality",
]


def _attributes(value, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: attributes must be a mapping, got {type(value).__name__}")
    return {str(k): str(v) for k, v in value.items() if v is not None and str(v) != ""}


@dataclass(frozen=True)
class SelectedExemplar:
    """One chosen exemplar: its gold program / derivation (``None`` if it has none) and attributes."""

    program: object = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    id: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "exemplar") -> SelectedExemplar:
        if isinstance(data, SelectedExemplar):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {type(data).__name__}")
        program = data.get("program") or data.get("derivation") or None
        return cls(program, _attributes(data.get("attributes"), where), data.get("id"))


@dataclass(frozen=True)
class QuerySelection:
    """What was selected for one query (see the module docstring)."""

    gold_program: object = None
    attributes: Mapping[str, str] = field(default_factory=dict)
    exemplars: Sequence[SelectedExemplar] = ()
    prompt_tokens: int | None = None
    budget: int | None = None
    within_budget: bool | None = None
    query_id: str | None = None

    @classmethod
    def from_dict(cls, data: Mapping, where: str = "query") -> QuerySelection:
        """Keys: ``gold_program`` (or ``program`` / ``derivation``), ``attributes``, ``exemplars`` (dicts with
        ``program`` / ``derivation``, ``attributes``, ``id``), ``prompt_tokens``, ``budget``,
        ``within_budget``, ``query_id`` (or ``id``). Missing keys are unknown."""
        if isinstance(data, QuerySelection):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"{where}: expected a mapping, got {type(data).__name__}")
        where = f"{where} {data.get('query_id') or data.get('id') or ''}".strip()
        exemplars = data.get("exemplars") or []
        if not isinstance(exemplars, (list, tuple)):
            raise TypeError(f"{where}: 'exemplars' must be a list, got {type(exemplars).__name__}")
        for key in ("prompt_tokens", "budget"):
            value = data.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise ValueError(f"{where}: {key!r} must be a number, got {value!r}")
        gold = data.get("gold_program") or data.get("program") or data.get("derivation") or None
        return cls(gold, _attributes(data.get("attributes"), where),
                   tuple(SelectedExemplar.from_dict(e, f"{where}, exemplar {i}") for i, e in enumerate(exemplars)),
                   data.get("prompt_tokens"), data.get("budget"), data.get("within_budget"),
                   data.get("query_id") or data.get("id"))

    def is_within_budget(self) -> bool | None:
        if self.within_budget is not None:
            return bool(self.within_budget)
        if self.prompt_tokens is not None and self.budget is not None:
            return self.prompt_tokens <= self.budget
        return None


@dataclass(frozen=True)
class QueryScores:
    """Per-query selection scores (``None`` where not applicable)."""

    query_id: str | None
    n_exemplars: int
    program_scores: tuple[float, ...] | None
    best_program_score: float | None
    mean_program_score: float | None
    gold_case_hit: bool | None
    attribute_match: Mapping[str, float]
    within_budget: bool | None


def program_parses(program) -> bool:
    """A program with at least one step: a lone number ("2019", a count's single item) is no program."""
    if program is None or (isinstance(program, str) and not program.strip()):
        return False
    try:
        return bool(to_steps(program))
    except ValueError:
        return False


def program_score(candidate, gold) -> float:
    """How similar an exemplar's program is to a query's gold one (0 when the exemplar's does not parse)."""
    if not program_parses(candidate):
        return 0.0
    return float(program_similarity(candidate, gold))


def score_query(query: QuerySelection | Mapping, threshold: float = GOLD_CASE_THRESHOLD) -> QueryScores:
    """Selection scores of one query (see the module docstring)."""
    query = QuerySelection.from_dict(query)
    exemplars = list(query.exemplars)
    program_scores = best = mean = hit = None
    if program_parses(query.gold_program):
        program_scores = tuple(program_score(e.program, query.gold_program) for e in exemplars)
        best = max(program_scores) if program_scores else 0.0
        mean = sum(program_scores) / len(program_scores) if program_scores else 0.0
        hit = best >= threshold
    matches = {}
    if exemplars:
        for attr, value in query.attributes.items():
            matches[attr] = sum(e.attributes.get(attr) == value for e in exemplars) / len(exemplars)
    return QueryScores(query.query_id, len(exemplars), program_scores, best, mean, hit, matches,
                       query.is_within_budget())


@dataclass
class SelectionQuality:
    """Aggregated selection quality (fractions / scores in [0, 1]; ``mean_exemplars`` a count)."""

    n_queries: int
    gold_case_hit_rate: Estimate
    mean_best_program_score: Estimate
    mean_program_score: Estimate
    attribute_match_rate: dict[str, Estimate]
    within_budget_rate: Estimate
    mean_exemplars: Estimate
    queries: list[QueryScores] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        """JSON-ready: ``{name: value, name_ci90: [low, high], ...}`` plus ``n_queries``; NaN -> ``None``."""
        out: dict = {"n_queries": self.n_queries}

        def put(name: str, estimate: Estimate) -> None:
            d = estimate.to_dict()
            out[name] = d["value"]
            out[f"{name}_ci90"] = [d["low"], d["high"]]
            out[f"{name}_n"] = d["n"]

        put("gold_case_hit_rate", self.gold_case_hit_rate)
        put("mean_best_program_score", self.mean_best_program_score)
        put("mean_program_score", self.mean_program_score)
        for attr, estimate in sorted(self.attribute_match_rate.items()):
            put(f"attribute_match_rate.{attr}", estimate)
        put("within_budget_rate", self.within_budget_rate)
        put("mean_exemplars", self.mean_exemplars)
        return out


def selection_quality(queries: Iterable[QuerySelection | Mapping], *, threshold: float = GOLD_CASE_THRESHOLD,
                      level: float = DEFAULT_LEVEL, seed: int = 0) -> SelectionQuality:
    """Aggregate :func:`score_query` over ``queries`` with ``level`` confidence intervals (seeded bootstrap)."""
    scores = [score_query(QuerySelection.from_dict(q, f"query {i}"), threshold) for i, q in enumerate(queries)]
    with_program = [s for s in scores if s.best_program_score is not None]
    hits = sum(bool(s.gold_case_hit) for s in with_program)
    budget_known = [s.within_budget for s in scores if s.within_budget is not None]
    attributes = sorted({attr for s in scores for attr in s.attribute_match})
    return SelectionQuality(
        n_queries=len(scores),
        gold_case_hit_rate=proportion_estimate(hits, len(with_program), level),
        mean_best_program_score=mean_estimate([s.best_program_score for s in with_program], level, seed),
        mean_program_score=mean_estimate([s.mean_program_score for s in with_program], level, seed),
        attribute_match_rate={attr: mean_estimate([s.attribute_match[attr] for s in scores
                                                   if attr in s.attribute_match], level, seed)
                              for attr in attributes},
        within_budget_rate=proportion_estimate(sum(budget_known), len(budget_known), level),
        mean_exemplars=mean_estimate([s.n_exemplars for s in scores], level, seed),
        queries=scores,
    )

