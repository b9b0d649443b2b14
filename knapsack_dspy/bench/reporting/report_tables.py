"""The report's tables, as data: ``report.md`` renders them as Markdown and the per-question page as HTML.

Per setting (dataset, pipeline, budget, M, model, retrieval), SEER's Table 1 layout: rows = runs (selectors),
columns = metrics with 90 % intervals; then the paired comparisons (per question and by document), the same
per gold answer type, and the model-free selection quality. Then, across settings: exact match per gold answer
type, per route (routed pipelines) and the time per question.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from knapsack_dspy.bench.scoring.run_metrics import setting_of

__all__ = ["Table", "format_duration", "report_tables", "setting_title"]


@dataclass
class Table:
    """A titled table of text cells (``setting``: the setting's heading it belongs under, if any)."""

    title: str
    header: list[str]
    rows: list[list[str]]
    note: str = ""
    setting: str = ""
    kind: str = field(default="scores")

    def markdown(self) -> list[str]:
        lines = [f"{self.title}:", ""] if self.title else []
        if self.note:
            lines += [self.note, ""]
        lines.append("| " + " | ".join(self.header) + " |")
        lines.append("|" + "---|" * len(self.header))
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in self.rows]
        return [*lines, ""]

    def to_dict(self) -> dict:
        return asdict(self)


def _fmt(m: Mapping, key: str) -> str:
    if m.get(key) is None:
        return "–"
    ci = m.get(f"{key}_ci")
    if ci:
        return f"{m[key]:.1f} [{ci[0]:.1f}, {ci[1]:.1f}]"
    return f"{m[key]:.1f}" if isinstance(m[key], float) else str(m[key])


def _cell(m: Mapping, key: str) -> str:
    value = m.get(key)
    if isinstance(value, float) and f"{key}_ci" not in m:
        return f"{value:.2f}" if key in ("program_score", "mean_exemplars") else f"{value:.1f}"
    return _fmt(m, key)


def setting_title(setting: tuple) -> str:
    dataset, pipeline, budget, M, model, retrieval, exemplar_budget = setting
    budgets = f"budget {budget}" + (f", exemplars ≤ {exemplar_budget}" if exemplar_budget is not None else "")
    return f"{dataset} · {pipeline} · {budgets} · M={M} · {model}" + (f" · {retrieval}" if retrieval else "")


def _main_table(items: list[dict], title: str) -> Table:
    if items[0]["spec"].get("selection_only"):
        cols = [("gold-case hit", "gold_case_hit"), ("program score", "program_score"),
                *_attribute_columns(items), ("within budget", "within_budget"),
                ("#exemplars", "mean_exemplars"), ("prompt tokens", "mean_prompt_tokens"),
                ("exemplar tokens", "mean_exemplar_tokens"), ("selection ms (median)", "selection_ms_median"),
                ("ended by a limit", "limited"), ("of which the greedy's", "limited_greedy")]
        cols = [c for c in cols if c[1] != "mean_exemplar_tokens" or any(m.get(c[1]) is not None for m in items)]
        if not any(m.get("limited") for m in items):
            cols = [c for c in cols if c[1] not in ("limited", "limited_greedy")]
    else:
        cols = [("accuracy", "accuracy"), ("EM", "em"), ("program accuracy", "program_accuracy"), ("F1", "f1"),
                ("entailment", "entailment_accuracy"), ("numerical, exact $", "numerical_exact"),
                ("numerical, within 10 %", "numerical_within_10pct"),
                ("numerical, authors' rule", "authors_rule"), ("within budget", "within_budget"),
                ("#exemplars", "mean_exemplars"), ("prompt tokens", "mean_prompt_tokens"),
                ("exemplar tokens", "mean_exemplar_tokens"), ("answered wrong", "answered_wrong"),
                ("could not ask", "could_not_ask"),
                ("internal errors", "internal_errors"), ("score errors", "score_errors"),
                ("selection ended by a limit", "limited"), ("of which the greedy's", "limited_greedy"), ("n", "n")]
        if any((m["spec"].get("samples") or 1) > 1 for m in items):  # self-consistency runs: what it cost
            cols[-1:-1] = [("LM calls / q", "lm_calls_per_question"), ("tokens used / q", "tokens_per_question"),
                           ("votes of the answer", "mean_votes")]
        cols = [c for c in cols if any(m.get(c[1]) is not None for m in items)]
        for optional, shown_with in (("score_errors", ()), ("internal_errors", ()), ("limited", ("limited_greedy",))):
            if not any(m.get(optional) for m in items):
                cols = [c for c in cols if c[1] != optional and c[1] not in shown_with]
        if any(m.get("em") is not None for m in items):  # accuracy is EM there: show it once
            cols = [c for c in cols if c[1] != "accuracy"]
    rows = [[str(m.get("label")), *(_cell(m, key) for _, key in cols)] for m in items]
    return Table("", ["selector", *(c[0] for c in cols)], rows, setting=title)


def _difference(d: Mapping) -> str:
    if d.get("difference") is None:
        return "–"
    text = f"{d['difference']:+.1f} [{d['low']:+.1f}, {d['high']:+.1f}]"
    if d.get("cluster_low") is not None:
        text += f" [{d['cluster_low']:+.1f}, {d['cluster_high']:+.1f}]"
    return text


def _comparison_tables(comparisons: list[dict], title: str) -> list[Table]:
    if not comparisons:
        return []
    rows = []
    for c in comparisons:
        em, f1 = c.get("em") or {}, c.get("f1") or {}
        p = em.get("mcnemar_p")
        docs = em.get("clusters", f1.get("clusters"))
        rows.append([f"{c['a']} − {c['b']}", f"{em.get('n', f1.get('n', 0))}" + (f" ({docs})" if docs else ""),
                     _difference(em), f"{em.get('wins', '–')} / {em.get('losses', '–')}",
                     "–" if p is None else f"{p:.2f}", _difference(f1)])
    tables = [Table("Paired comparisons", ["comparison", "n (documents)", "EM difference", "better / worse",
                                           "McNemar p", "F1 difference"], rows,
                    note=("The same questions; difference in points with two 90 % intervals: the paired bootstrap "
                          "over questions, then the bootstrap by document (a document's questions resampled "
                          "together; the one to trust when they differ). McNemar exact p on the questions "
                          "exactly one of the two got right."), setting=title, kind="comparisons")]
    types = sorted({t for c in comparisons for t in c.get("by_answer_type", {})})
    if types:
        rows = []
        for c in comparisons:
            cells = []
            for t in types:
                em = (c.get("by_answer_type", {}).get(t) or {}).get("em") or {}
                cells.append(f"{_difference(em)} (n={em['n']})" if em.get("n") else "–")
            rows.append([f"{c['a']} − {c['b']}", *cells])
        tables.append(Table("EM difference per gold answer type", ["comparison", *types], rows,
                            note="Intervals as above: per question, then by document.", setting=title,
                            kind="comparisons"))
    return tables


def _attribute_columns(items: list[dict]) -> list[tuple[str, str]]:
    """(title, metrics key) of the attribute matches shown: of each attribute the runs' selections constrain
    (``attributes``) that a run measured (``attribute_match.<attribute>``)."""
    constrained = dict.fromkeys(a for m in items for a in (m["spec"].get("attributes") or ()))
    return [(f"{a} match", f"attribute_match.{a}") for a in constrained
            if any(m.get(f"attribute_match.{a}") is not None for m in items)]


def _quality_table(items: list[dict], title: str) -> list[Table]:
    matches = _attribute_columns(items)
    quality = [m for m in items if m.get("gold_case_hit") is not None
               or any(m.get(key) is not None for _, key in matches)]
    if items[0]["spec"].get("selection_only") or not quality:
        return []
    rows = []
    for m in quality:
        ps = m.get("program_score")
        rows.append([str(m.get("label")), _fmt(m, "gold_case_hit"), "–" if ps is None else f"{ps:.3f}",
                     *(_fmt(m, key) for _, key in matches), _fmt(m, "selection_ms_median")])
    return [Table("Selection quality (model-free)",
                  ["selector", "gold-case hit", "program score", *(name for name, _ in matches),
                   "selection ms (median)"], rows, setting=title, kind="quality")]


def _run_names(items: list[dict]) -> dict[str, str]:
    """A run's name in the tables across settings: its label, and its setting when there are several."""
    several = len({setting_of(m["spec"]) for m in items}) > 1
    return {m["run"]: f"{m.get('label')} · {setting_title(setting_of(m['spec']))}" if several else str(m.get("label"))
            for m in items}


def _breakdown_table(items: list[dict], key: str, title: str, note: str) -> list[Table]:
    runs = [m for m in items if m.get(key)]
    if not runs:
        return []
    values = sorted({v for m in runs for v in m[key]})
    names = _run_names(items)
    rows = []
    for m in runs:
        cells = [f"{_fmt(part, 'em')} (n={part['n']})" if (part := m[key].get(v)) else "–" for v in values]
        rows.append([names[m["run"]], *cells])
    return [Table(title, ["run", *values], rows, note=note, kind="breakdown")]


def format_duration(seconds: float) -> str:
    """``12.3 ms`` below a second, else ``4.5 s``."""
    return f"{1000 * seconds:.1f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _time_table(items: list[dict]) -> list[Table]:
    runs = [m for m in items if m.get("time_per_question")]
    if not runs:
        return []
    names = _run_names(items)
    rows = []
    for m in runs:
        t = m["time_per_question"]
        split = t["lm"] is not None
        rows.append([names[m["run"]], str(t["n"]), format_duration(t["total"]),
                     format_duration(t["lm"]) if split else "–", format_duration(t["selection"]),
                     format_duration(t["other"]) if split else "–"])
    return [Table("Time per question", ["run", "rows", "total", "LM calls", "selection", "other"], rows,
                  note=("Means over the rows that called the LM (rows answered from the LM cache left out; every "
                        "row of a selection-only run). LM calls: the time inside them (rows record lm_seconds); "
                        "other: retrieval, running the program, scoring. Rows written before lm_seconds existed "
                        "do not split LM calls from other (–)."), kind="time")]


def _mean_median(part: Mapping | None, digits: int = 0, unit: str = "") -> str:
    """``mean [interval] / median`` of a ``tokens_seconds`` figure; ``""`` (blank) when the rows record none."""
    if not part:
        return ""
    ci = f" [{part['ci'][0]:.{digits}f}, {part['ci'][1]:.{digits}f}]" if part.get("ci") else ""
    return f"{part['mean']:.{digits}f}{unit}{ci} / {part['median']:.{digits}f}{unit}"


def _pieces(t: Mapping) -> str:
    """``kept / offered`` pieces per prompt (means); blank without selectable evidence."""
    kept, offered = t.get("pieces_kept"), t.get("pieces_offered")
    return f"{kept['mean']:.1f} / {offered['mean']:.1f}" if kept and offered else ""


def _tokens_table(items: list[dict]) -> list[Table]:
    runs = [m for m in items if m.get("tokens_seconds")]
    if not runs:
        return []
    names = _run_names(items)
    rows = []
    for m in runs:
        t = m["tokens_seconds"]
        per_1k = t.get("right_per_1k_prompt_tokens")
        rows.append([names[m["run"]], _mean_median(t.get("prompt_tokens")),
                     _mean_median(t.get("tokens_after_instructions")), _mean_median(t.get("demos"), 1),
                     _pieces(t), str(t.get("n_asked", 0)),
                     _mean_median(t.get("lm_prompt_tokens")), _mean_median(t.get("new_prompt_tokens")),
                     _mean_median(t.get("prefill_s"), 1, " s"), _mean_median(t.get("decode_s"), 1, " s"),
                     "" if per_1k is None else f"{per_1k:.3f}"])
    return [Table("Tokens and seconds per question",
                  ["run", "prompt tokens (selection)", "after the instructions", "demos", "pieces shown / offered",
                   "rows that asked the LM", "prompt tokens (LM)", "new to the prompt cache", "prefill", "decode",
                   "right per 1,000 prompt tokens"], rows,
                  note=("Mean [90 % bootstrap interval] / median per question. Prompt tokens (selection): as "
                        "selection measured the prompt (question + exemplars), every row; after the instructions: "
                        "less the system message every prompt opens with (the demos, the question and its "
                        "evidence); demos: exemplars per prompt; pieces shown / offered: with selectable evidence, "
                        "the document's pieces (rows, paragraphs, statute subsections) the prompt showed, of "
                        "those offered (means). The LM figures are over "
                        "the rows that asked the LM (answers from the LM cache or replayed left out): prompt tokens "
                        "the LM reported (every call of the question), those new to its prompt cache (reported - "
                        "cached, where the provider says what its cache served), prefill and decode seconds (the "
                        "embedded models' timings). Right per 1,000 prompt tokens: right answers / selection-"
                        "measured prompt tokens x 1,000. Blank: the rows do not record it (selection-only runs, "
                        "rows written before the field existed, providers that do not report it)."),
                  kind="tokens")]


def report_tables(metrics: Mapping[str, dict], comparisons: list[dict] | None = None) -> list[Table]:
    """Every table of the report, in order; tables of one setting carry its title in ``setting``."""
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for m in metrics.values():
        groups[setting_of(m["spec"])].append(m)
    tables: list[Table] = []
    for setting, items in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        items = sorted(items, key=lambda m: m.get("label", ""))
        title = setting_title(setting)
        tables.append(_main_table(items, title))
        tables += _comparison_tables([c for c in comparisons or [] if tuple(c["setting"]) == setting], title)
        tables += _quality_table(items, title)
    everything = sorted(metrics.values(), key=lambda m: (str(setting_of(m["spec"])), m.get("label", "")))
    tables += _breakdown_table(everything, "by_answer_type", "Exact match per gold answer type",
                               "EM in percent with its 90 % Wilson interval; n questions of that type.")
    tables += _breakdown_table(everything, "by_route", "Exact match per route",
                               "Routed pipelines: the questions each route answered (extract: the span read from "
                               "the document; compute: a program).")
    tables += _time_table(everything)
    tables += _tokens_table(everything)
    return tables
