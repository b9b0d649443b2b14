"""Paired comparisons of the runs of one setting on the questions they share (``comparisons.json``).

Within each setting (``run_metrics.setting_of``), every run is compared with the reference — the default
selector (``DEFAULT_SELECTOR``) if it ran, else the one before it (``EARLIER_DEFAULT``: the committed suites'
reference), else the suite's first run — on EM and F1 (``metrics.paired``): the
difference in points with the per-question paired-bootstrap interval, the interval bootstrapped by document
(questions of one document resampled together: each row's ``doc_id``), wins / losses and the exact McNemar p. When
the questions' gold answer types are known, the same comparison per answer type (``by_answer_type``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from knapsack_dspy.bench.results.question_facts import QuestionFacts, facts_key
from knapsack_dspy.bench.results.row_schema import ResultRow, rows_of
from knapsack_dspy.bench.scoring.run_metrics import LEVEL, setting_of
from knapsack_dspy.docqa.metrics.paired import paired_comparison
from knapsack_dspy.selection.selectors.registry import DEFAULT_SELECTOR

__all__ = ["EARLIER_DEFAULT", "SCORES", "compare_selectors"]

SCORES = (ResultRow.em.name, ResultRow.f1.name)
#: the default selector until issue 38 (KATE within budget): the reference of every committed comparison
EARLIER_DEFAULT = "kate_within_budget"
_POINTS = ("mean_a", "mean_b", "difference", "low", "high", "cluster_low", "cluster_high")  # fractions -> points


def _in_points(comparison: Mapping) -> dict:
    return {k: (100.0 * v if k in _POINTS and v is not None else v) for k, v in comparison.items()}


def _compare(a: Mapping[str, float], b: Mapping[str, float], groups: Mapping[str, str | None]) -> dict:
    return _in_points(paired_comparison(a, b, level=LEVEL, groups=groups).to_dict())


def compare_selectors(rows: Iterable[Mapping], metrics: dict[str, dict],
                      facts: QuestionFacts | None = None) -> list[dict]:
    """Paired comparisons within each setting: every run against the reference on the questions both answered,
    for EM and F1 (per question and by document), and per gold answer type when ``facts`` know it."""
    scores: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    groups: dict[str, str | None] = {}
    answer_types: dict[str, str] = {}
    for row in rows_of(rows):
        qid = str(row.example_id)
        groups[qid] = row.doc_id or None
        answer_type = (facts or {}).get(facts_key(row), {}).get("answer_type")
        if answer_type:
            answer_types[qid] = answer_type
        for field in (ResultRow.em, ResultRow.f1):
            if field.of(row) is not None:
                scores[row.run][field.name][qid] = float(field.of(row))
    by_setting: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        if not m["spec"].get("selection_only") and m["run"] in scores:
            by_setting[setting_of(m["spec"])].append(m)
    out = []
    for setting, items in sorted(by_setting.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        if len(items) < 2:
            continue
        # the reference: the default selector when it ran, else the earlier default, else the suite's first
        ref = next((m for name in (DEFAULT_SELECTOR, EARLIER_DEFAULT) for m in items
                    if m["spec"].get("selector") == name), items[0])
        items = sorted(items, key=lambda m: m.get("label", ""))
        for other in items:
            if other is ref:
                continue
            if not set(scores[ref["run"]].get("em") or scores[ref["run"]].get("f1") or {}) & \
                    set(scores[other["run"]].get("em") or scores[other["run"]].get("f1") or {}):
                continue  # no question in common (e.g. SARA's entailment and numerical groups): nothing to pair
            entry = {"setting": list(setting), "a": ref.get("label"), "b": other.get("label"),
                     "run_a": ref["run"], "run_b": other["run"]}
            a_scores, b_scores = scores[ref["run"]], scores[other["run"]]
            for name in SCORES:
                if a_scores.get(name) and b_scores.get(name):
                    entry[name] = _compare(a_scores[name], b_scores[name], groups)
            by_type: dict[str, dict] = {}
            for answer_type in sorted(set(answer_types.values())):
                ids = {q for q, t in answer_types.items() if t == answer_type}
                a_em = {q: v for q, v in a_scores.get("em", {}).items() if q in ids}
                b_em = {q: v for q, v in b_scores.get("em", {}).items() if q in ids}
                if set(a_em) & set(b_em):
                    by_type[answer_type] = {"em": _compare(a_em, b_em, groups)}
            if by_type:
                entry["by_answer_type"] = by_type
            out.append(entry)
    return out
