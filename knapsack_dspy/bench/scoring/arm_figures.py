"""The runs of one results directory read as the named arms of a pre-registered comparison: per arm and question
whether it was right, its prompt tokens and seconds; per arm the figures an analysis reports; paired differences.

What the gate scripts share (``experiments/tokens/tokens_gate.py``, ``experiments/gsm8k/gsm8k_arms.py``,
``benchmarks/gsm8k_default_gate.py``, ``benchmarks/whole_prompt_gate.py``): each names its runs by its own rule
(``arm_of(spec) -> arm``, raising :class:`ArmError` for a run it does not know) and decides its own gate. A
prompt two arms share is answered once (DSPy's cache): the row the cache served is given the seconds of the row
that asked it (the same ``prompt_sha256``), so that an arm's seconds per question are what it costs alone. A row
whose LM call failed counts as wrong, as in the reports (a resumed run asks it again and replaces it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from knapsack_dspy.docqa.metrics.paired import paired_comparison
from knapsack_dspy.errors import KnapsackDspyError

__all__ = ["ArmError", "arm_figures", "arms_table", "difference", "differences_table", "fewest_tokens_non_inferior",
           "figure_text", "read_arms"]


class ArmError(KnapsackDspyError, ValueError):
    """The rows cannot be read as the comparison's arms (a run it does not have, two runs as one arm)."""


def read_arms(rows: Iterable, arm_of: Callable[[Mapping], str], arms: Sequence[str]) -> dict[str, dict[str, dict]]:
    """arm -> question -> {em, tokens, exemplars, within, doc, prefill, decode, lm, failed, prompt, after_instructions,
    pieces, instructions} from result rows (selection-only rows left out; ``failed``: the row has an error, counted
    wrong; ``prompt``: its ``prompt_sha256`` as a tuple, empty when it has none; the last three: the row's
    ``tokens_after_instructions``, ``pieces_kept`` and ``instructions_sha256``, None when it has none); every arm
    of ``arms`` is a key, empty when no run read as it."""
    rows = [row for row in rows if not row.spec.get("selection_only")]
    asked: dict[tuple, tuple] = {}  # prompt_sha256 -> seconds of the row that asked it
    for row in rows:
        if row.lm_calls and row.prompt_sha256:
            asked.setdefault(tuple(row.prompt_sha256), (row.prefill_s, row.decode_s, row.lm_seconds))
    runs: dict[str, set] = {}
    out: dict[str, dict[str, dict]] = {arm: {} for arm in arms}
    for row in rows:
        arm = arm_of(row.spec)
        if arm not in out:
            raise ArmError(f"arm_of named an arm the comparison does not have: {arm!r}")
        runs.setdefault(arm, set()).add(row.run)
        own = (row.prefill_s, row.decode_s, row.lm_seconds)
        prefill, decode, lm = own if row.lm_calls else asked.get(tuple(row.prompt_sha256 or ()), (None,) * 3)
        out[arm][row.example_id] = {"em": float(bool(row.em)), "tokens": row.prompt_tokens,
                                    "exemplars": len(row.exemplar_ids or ()), "within": row.within_budget,
                                    "doc": row.doc_id or row.example_id, "prefill": prefill, "decode": decode,
                                    "lm": lm, "failed": bool(row.error), "prompt": tuple(row.prompt_sha256 or ()),
                                    "after_instructions": row.tokens_after_instructions,
                                    "pieces": row.pieces_kept, "instructions": row.instructions_sha256}
    for arm, keys in runs.items():
        if len(keys) > 1:
            raise ArmError(f"{len(keys)} runs read as the arm {arm!r}: {', '.join(sorted(keys))}")
    return out


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def arm_figures(answers: Mapping[str, dict], questions: Iterable[str]) -> dict:
    """One arm on ``questions`` (those it answered): n, EM in percent, mean prompt tokens and exemplars, prompts
    within budget in percent, right answers per 1,000 prompt tokens, mean prefill / decode / LM seconds, mean
    tokens after the instructions and pieces shown (None where the rows do not record them)."""
    rows = [answers[q] for q in questions if q in answers]
    right = sum(r["em"] for r in rows)
    tokens = sum(r["tokens"] for r in rows if r["tokens"] is not None)
    return {"n": len(rows), "em": 100.0 * right / max(len(rows), 1),
            "prompt_tokens": _mean(r["tokens"] for r in rows),
            "exemplars": _mean(r["exemplars"] for r in rows),
            "within_budget": 100.0 * sum(bool(r["within"]) for r in rows) / max(len(rows), 1),
            "right_per_1000_tokens": 1000.0 * right / tokens if tokens else None,
            "prefill_s": _mean(r["prefill"] for r in rows), "decode_s": _mean(r["decode"] for r in rows),
            "lm_s": _mean(r["lm"] for r in rows),
            "tokens_after_instructions": _mean(r.get("after_instructions") for r in rows),
            "pieces": _mean(r.get("pieces") for r in rows)}


def difference(arms: Mapping[str, Mapping[str, dict]], a: str, b: str, questions: Iterable[str]) -> dict:
    """``a`` − ``b`` in EM points on the ``questions`` both answered: the paired comparison (per question and by
    document, 90 %; wins / losses)."""
    shared = [q for q in questions if q in arms[a] and q in arms[b]]
    score_a = {q: 100.0 * arms[a][q]["em"] for q in shared}
    score_b = {q: 100.0 * arms[b][q]["em"] for q in shared}
    return paired_comparison(score_a, score_b, groups={q: arms[a][q]["doc"] for q in shared}).to_dict()


def fewest_tokens_non_inferior(arms: Mapping[str, Mapping[str, dict]], questions: Sequence[str], *,
                               margin: float = 5.0, order: Sequence[str] | None = None) -> dict:
    """Which arm should be the default: the fewest-token arm that is non-inferior to the most accurate one.

    The most accurate arm is the one right most often on ``questions`` (among the arms that answered all of them;
    a tie goes to the first in ``order``, default the keys of ``arms``). An arm is non-inferior to it when the
    lower 90 % bound by document of (arm − most accurate), paired on the questions both answered, is at least
    −``margin`` points -- an arm that answered only some of ``questions`` (e.g. no demos on the first half) is
    compared on those. Of the non-inferior arms the one with the fewest mean prompt tokens on the questions it
    answered is chosen (a tie: the more accurate, then the first in ``order``). Returns ``{"most_accurate",
    "chosen", "margin", "arms": {arm: {em, prompt_tokens, n, difference, lower_bound, non_inferior}}}``."""
    order = list(order or arms)
    answered = {arm: [q for q in questions if q in arms[arm]] for arm in order if arms.get(arm)}
    figures = {arm: arm_figures(arms[arm], own) for arm, own in answered.items()}
    full = [arm for arm, f in figures.items() if f["n"] == len(questions)]
    if not full:
        raise ArmError("no arm answered every question: nothing to call the most accurate")
    best = max(full, key=lambda arm: (figures[arm]["em"], -order.index(arm)))
    out: dict = {"most_accurate": best, "margin": margin, "arms": {}}
    for arm, f in figures.items():  # the most accurate arm against itself: 0, nothing to bootstrap
        d = {"difference": 0.0, "cluster_low": 0.0} if arm == best else difference(arms, arm, best, answered[arm])
        low = d["cluster_low"]
        out["arms"][arm] = {"n": f["n"], "em": f["em"], "prompt_tokens": f["prompt_tokens"],
                            "difference": d["difference"], "lower_bound": low,
                            "non_inferior": low is not None and low >= -margin}
    fits = [arm for arm, f in out["arms"].items() if f["non_inferior"] and f["prompt_tokens"] is not None]
    out["chosen"] = min(fits, key=lambda arm: (out["arms"][arm]["prompt_tokens"], -out["arms"][arm]["em"],
                                               order.index(arm)))
    return out


def figure_text(value, fmt: str) -> str:
    """``value`` formatted with ``fmt``; "–" for a figure the rows do not give (``None``)."""
    return "–" if value is None else format(value, fmt)


def arms_table(figures: Mapping[str, Mapping], score: str = "EM") -> list[str]:
    """The arms' figures as a Markdown table (``score`` names the accuracy column)."""
    lines = [f"| arm | n | {score} | prompt tokens | exemplars | within budget | right / 1,000 tokens | prefill s | "
             "decode s | LM s |", "|---|---|---|---|---|---|---|---|---|---|"]
    for arm, f in figures.items():
        lines.append(f"| {arm} | {f['n']} | {f['em']:.1f} | {figure_text(f['prompt_tokens'], '.0f')} | "
                     f"{figure_text(f['exemplars'], '.2f')} | {f['within_budget']:.1f} % | "
                     f"{figure_text(f['right_per_1000_tokens'], '.2f')} | {figure_text(f['prefill_s'], '.1f')} | "
                     f"{figure_text(f['decode_s'], '.1f')} | {figure_text(f['lm_s'], '.1f')} |")
    return lines


def differences_table(named: Mapping[str, Mapping]) -> list[str]:
    """Named paired differences (:func:`difference`) as a Markdown table."""
    lines = ["| difference (points) | n | estimate | 90 % by question | 90 % by document | wins / losses |",
             "|---|---|---|---|---|---|"]
    for name, d in named.items():
        lines.append(f"| {name} | {d['n']} | {figure_text(d['difference'], '+.1f')} | "
                     f"[{figure_text(d['low'], '+.1f')}, {figure_text(d['high'], '+.1f')}] | "
                     f"[{figure_text(d['cluster_low'], '+.1f')}, "
                     f"{figure_text(d['cluster_high'], '+.1f')}] | {d['wins']} / {d['losses']} |")
    return lines
