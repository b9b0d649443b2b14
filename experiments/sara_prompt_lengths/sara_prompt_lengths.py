"""How long SARA prompts are, per statute retrieval strategy, with chain of thought and 0 / 2 exemplars.

    python experiments/sara_prompt_lengths/sara_prompt_lengths.py                                  # as shipped and with the budget
    python experiments/sara_prompt_lengths/sara_prompt_lengths.py --statute-tokens none,1024,1536 --out lengths.json

No LM call: every prompt is counted with the target model's tokenizer (``--model``, default the 1.5B, counted by
the 0.5B, which shares it), as the bench counts them (``StatuteQA.select_for``: ``base_tokens`` is the prompt
without exemplars, ``prompt_tokens`` with the selected ones). The 256 SARA train cases are both the questions and
the pool; a case's exemplars leave its group out (its ``_pos`` / ``_neg`` twin; ``data.sara.case_group``).

For each statute budget (``--statute-tokens``; ``none``: no limit, the statute text as the strategy picks it):
- ``none``: the exemplars are the 2 nearest cases (``kate``, which ignores the token budget): what a prompt
  would be without any limit;
- a number: ``StatuteQA(statute_tokens=N)`` cuts each statute text (a query's and every demo's) by the
  hierarchy, and ``kate_within_budget`` takes the nearest cases that still fit ``--budget`` (the whole prompt,
  output reserve ``--reserve`` kept free).
A prompt fits the model when prompt + the answer's ``--max-tokens`` <= the context (``--n-ctx``, the embedded
server's 4,096). Prints a Markdown table; writes JSON (``--out``, default
``experiments/sara_prompt_lengths/results/sara_prompt_lengths.json``).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import knapsack_dspy  # noqa: F401  (offline defaults before dspy / litellm / HF imports)

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "sara_prompt_lengths.json"


def _stats(values: list[int]) -> dict:
    ordered = sorted(values)
    return {"n": len(values), "median": statistics.median(values), "p90": ordered[int(0.9 * (len(values) - 1))],
            "max": max(values)}


def measure(strategy: str, statute_tokens: int | None, cases, args, embedder, counter) -> dict:
    from knapsack_dspy.docqa.tasks import build_pipeline
    from knapsack_dspy.teleprompt.knapsack_few_shot import KnapsackFewShot

    selector = "kate" if statute_tokens is None else "kate_within_budget"
    student = build_pipeline("sara", "cot", retrieval=strategy, embedder=embedder, token_counter=counter,
                             model=args.model, selector=selector, max_exemplars=2, attributes=(),
                             budget=args.budget, reserve_output_tokens=args.reserve,
                             **({"statute_tokens": statute_tokens} if statute_tokens is not None else {}))
    program = KnapsackFewShot(progress=False, token_counter=counter).compile(student, trainset=cases)
    rows = []
    for case in cases:
        info = program.select_for(case)
        retrieved = program.retrieve(question=case.question,
                                     count_tokens=counter.count_text if statute_tokens is not None else None)
        rows.append({"id": case.id, "type": case.answer_type, "base": info["base_tokens"],
                     "prompt": info["prompt_tokens"], "exemplars": len(info["ids"]),
                     "within_budget": bool(info["within_budget"]), "truncated": bool(retrieved.truncated),
                     "statute": counter.count_text(retrieved.statute_text)})
    limit = args.n_ctx - args.max_tokens
    out = {"strategy": strategy, "statute_tokens": statute_tokens, "selector": selector}
    for kind in ("entailment", "numerical", "all"):
        part = [r for r in rows if kind in ("all", r["type"])]
        out[kind] = {"statute": _stats([r["statute"] for r in part]), "prompt_0": _stats([r["base"] for r in part]),
                     "prompt_2": _stats([r["prompt"] for r in part]),
                     "mean_exemplars": statistics.fmean(r["exemplars"] for r in part),
                     "over_context_0": sum(r["base"] > limit for r in part),
                     "over_context_2": sum(r["prompt"] > limit for r in part),
                     "within_budget": sum(r["within_budget"] for r in part),
                     "truncated": sum(r["truncated"] for r in part)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--statute-tokens", default="none,1536,2048", help="comma-separated budgets; none: no limit")
    parser.add_argument("--model", default="local/qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--budget", type=int, default=4096, help="the whole prompt's budget (default 4096)")
    parser.add_argument("--reserve", type=int, default=512, help="output tokens kept free (default 512)")
    parser.add_argument("--max-tokens", type=int, default=512, help="the answer's most tokens (default 512)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the model's context (default 4096)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)

    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.retrieval.statute_strategies import STRATEGIES
    from knapsack_dspy.embeddings import TextEmbedder
    from knapsack_dspy.llm.token_counter import get_token_counter

    budgets = [None if b.strip() == "none" else int(b) for b in args.statute_tokens.split(",")]
    cases = list(load_examples("sara", split="train"))
    embedder, counter = TextEmbedder(), get_token_counter(args.model)
    results = [measure(strategy, budget, cases, args, embedder, counter) for budget in budgets
               for strategy in STRATEGIES]
    print(f"SARA train, {len(cases)} cases, CoT; tokens of {args.model}; fits = prompt + {args.max_tokens} "
          f"answer tokens <= {args.n_ctx}; budget {args.budget} (reserve {args.reserve})\n")
    print("| statute budget | strategy | cases | statute tokens median / max | prompt, 0 exemplars median / p90 / "
          "max | prompt, 2 exemplars median / p90 / max | exemplars | over context (0 / 2) | within budget | "
          "statutes cut |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        for kind in ("entailment", "numerical"):
            part = result[kind]
            p0, p2, st = part["prompt_0"], part["prompt_2"], part["statute"]
            print(f"| {result['statute_tokens'] or 'none'} ({result['selector']}) | {result['strategy']} | {kind} "
                  f"{st['n']} | {st['median']:.0f} / {st['max']} | {p0['median']:.0f} / {p0['p90']} / {p0['max']} | "
                  f"{p2['median']:.0f} / {p2['p90']} / {p2['max']} | {part['mean_exemplars']:.2f} | "
                  f"{part['over_context_0']} / {part['over_context_2']} | {part['within_budget']} | "
                  f"{part['truncated']} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"model": args.model, "budget": args.budget, "reserve": args.reserve,
                                    "max_tokens": args.max_tokens, "n_ctx": args.n_ctx, "results": results},
                                   indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
