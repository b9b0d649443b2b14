"""How many prompt tokens a prompt cache can reuse, counted LM-free (no model answers anything).

For per-query SEER, hybrid and static selection (TAT-QA dev_pool -> dev_tune, program of thought, budget 2,048,
M = 4, the 1.5B model's tokenizer), every question's first prompt is rendered by the current code exactly as it
would be sent (``prompt_capture.first_prompt``) and tokenized; a server that keeps the previous prompt (llama.cpp's
slot, a provider's prefix cache) reuses the tokens a prompt shares from the start with the one before it. For
each demo order and question order the script reports reused / total prompt tokens, the new (not reused) tokens
per question and the prefill time they predict (``knapsack_dspy.llm.latency_rates``, the 1.5B's rates).

Demo orders: ``similarity`` (per query: SEER's, today's default), ``canonical`` (per query: one order over the
pool), ``fixed`` (static / hybrid now: the compile-time set or core opens every prompt in one order; hybrid's
per-query demos follow by similarity), ``fixed + canonical`` (hybrid: its per-query demos in the canonical
order), ``resorted`` (static / hybrid as before: the set re-sorted by each query's similarity; emulated by
folding the fixed prefix back into the similarity-ordered selection). Question orders: ``split`` (the split's order),
``grouped`` (``kdspy bench``: by route, then greedily by shared demo prefix and document).

    python benchmarks/prefix_reuse.py [--limit 504] [--modes seer,hybrid,static] [--route extract_compute]
                                      [--demo-orders fixed,similarity] [--latency-budgets 12,14]
                                      [--out DIR] [--json reuse.json]

``--latency-budgets`` adds, per mode, its default demo order under each latency budget (seconds, priced with the
1.5B's measured rates): how many demos survive, and the new tokens and LM seconds per question they predict.

Compiled programs are kept in ``--out`` (reloaded next time); rendering + tokenizing 504 prompts takes a few
minutes per variant on 2 busy cores (the 0.5B model is loaded to tokenize; no completion is asked).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import knapsack_dspy  # noqa: F401  # isort: skip  (environment defaults first)
from knapsack_dspy.bench.execution.question_order import cache_friendly_order, shared_prefix_length
from knapsack_dspy.llm.latency_rates import latency_rates
from knapsack_dspy.selection.exemplar_pool import make_selection
from knapsack_dspy.selection.latency import LatencyModel
from knapsack_dspy.selection.selectors import fixed_set, static_knapsack
from knapsack_dspy.testing.prompt_capture import MODEL, compiled, first_prompt, spec_for, token_ids

DEMO_ORDERS = {"seer": ("similarity", "canonical"), "hybrid": ("fixed", "fixed + canonical", "resorted"),
               "static": ("fixed", "resorted")}
QUESTION_ORDERS = ("split", "grouped")


@contextlib.contextmanager
def resorted_fixed_sets():
    """Static and hybrid selection as before: the fixed set (core) re-sorted by each query's similarity."""
    def as_before(pool, request, indices, similarities, status="ok", relaxed=(), reason="", *, prefix=()):
        return make_selection(pool, request, [*prefix, *indices], similarities, status, relaxed, reason)

    saved = static_knapsack.make_selection, fixed_set.make_selection
    static_knapsack.make_selection = fixed_set.make_selection = as_before
    try:
        yield
    finally:
        static_knapsack.make_selection, fixed_set.make_selection = saved


def reuse(prompts: list[list[int]]) -> dict:
    """Tokens each prompt shares from the start with the one before it (the first prompt reuses nothing)."""
    shared = [0, *(shared_prefix_length(a, b) for a, b in itertools.pairwise(prompts))]
    total = sum(len(p) for p in prompts)
    new = [len(p) - s for p, s in zip(prompts, shared, strict=True)]
    return {"questions": len(prompts), "prompt_tokens": total, "reused_tokens": sum(shared),
            "reused_share": round(sum(shared) / total, 4) if total else 0.0,
            "mean_prompt_tokens": round(total / len(prompts), 1) if prompts else 0.0,
            "mean_new_tokens": round(sum(new) / len(new), 1) if new else 0.0}


def demo_count(messages: list[dict]) -> int:
    """Demos in a chat prompt: the user / assistant pairs between the system message and the question."""
    return max(0, (len(messages) - 2) // 2)


def measure_mode(mode: str, demo_order: str, args, log, latency_budget: float | None = None) -> list[dict]:
    settings = {"demo_order": "canonical"} if demo_order.endswith("canonical") else {}
    if args.route:
        settings["route"] = args.route
    if latency_budget is not None:
        settings["latency_budget"] = latency_budget
    spec = spec_for(mode, **settings)
    program, evalset = compiled(spec, args.out, args.data_dir)
    examples = evalset[: args.limit] if args.limit else evalset
    started = time.perf_counter()
    with resorted_fixed_sets() if demo_order == "resorted" else contextlib.nullcontext():
        messages = {ex.id: first_prompt(program, ex) for ex in examples}
        ids = {key: token_ids(value) for key, value in messages.items()}
        orders = {"split": examples, "grouped": cache_friendly_order(program, examples)}
    log(f"{mode} / {demo_order}{'' if latency_budget is None else f' / {latency_budget:g} s'}: {len(examples)} "
        f"prompts rendered and tokenized in {time.perf_counter() - started:.0f} s")
    rates = LatencyModel.from_dict(latency_rates(MODEL))
    demos = sum(demo_count(m) for m in messages.values()) / max(1, len(messages))
    rows = []
    for order_name in QUESTION_ORDERS:
        stats = reuse([ids[ex.id] for ex in orders[order_name]])
        stats["predicted_prefill_s"] = round(rates.overhead_s + stats["mean_new_tokens"]
                                             / rates.prefill_tokens_per_s, 1)
        stats["predicted_lm_s"] = round(rates.seconds(stats["mean_new_tokens"]), 1)
        rows.append({"mode": mode, "demo_order": demo_order, "latency_budget": latency_budget,
                     "question_order": order_name, "mean_demos": round(demos, 2), **stats})
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["| mode | demo order | latency budget | question order | demos | prompt tokens reused "
             "| mean prompt tokens | mean new tokens | predicted prefill s / question | predicted LM s / question |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        budget = "–" if r.get("latency_budget") is None else f"{r['latency_budget']:g} s"
        lines.append(f"| {r['mode']} | {r['demo_order']} | {budget} | {r['question_order']} | {r['mean_demos']:.2f} "
                     f"| {100 * r['reused_share']:.0f} % | {r['mean_prompt_tokens']:.0f} | {r['mean_new_tokens']:.0f} "
                     f"| {r['predicted_prefill_s']} | {r['predicted_lm_s']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N dev_tune questions (default all 504)")
    parser.add_argument("--modes", default="seer,hybrid,static", help="comma-separated: seer, hybrid, static")
    parser.add_argument("--route", default="", help='"extract_compute": the routed pipeline (default: one solver)')
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kdspy-prefix-reuse"),
                        help="where compiled programs are kept (default: kdspy-prefix-reuse in the temporary folder)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--json", help="write the rows to this JSON file")
    parser.add_argument("--latency-budgets", default="",
                        help="comma-separated seconds: also each mode's default demo order under these latency budgets "
                             "(SelectionConfig.latency_budget, the 1.5B's measured rates)")
    parser.add_argument("--demo-orders", default="",
                        help="comma-separated: only these demo orders (default: all; 'none': only the budgets)")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = sorted(set(modes) - set(DEMO_ORDERS))
    if unknown:
        parser.error(f"unknown modes {unknown}; choose from {sorted(DEMO_ORDERS)}")
    try:
        budgets = [float(x) for x in args.latency_budgets.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--latency-budgets: numbers of seconds, got {args.latency_budgets!r}")
    if any(not math.isfinite(b) or b <= 0 for b in budgets):
        parser.error("--latency-budgets must be positive numbers of seconds")
    only = {o.strip() for o in args.demo_orders.split(",") if o.strip()}
    known = {order for mode in modes for order in DEMO_ORDERS[mode]}
    if only - known - {"none"}:
        parser.error(f"--demo-orders: unknown {sorted(only - known - {'none'})}; the modes' orders are "
                     f"{sorted(known)} ('none': only the latency budgets)")
    log = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for mode in modes:
        for demo_order in DEMO_ORDERS[mode]:
            if not only or demo_order in only:
                rows += measure_mode(mode, demo_order, args, log)
        for budget in budgets:
            rows += measure_mode(mode, DEMO_ORDERS[mode][0], args, log, latency_budget=budget)
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
