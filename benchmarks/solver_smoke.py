"""Run one solver with a real LM on a few TAT-QA questions: EM / F1 and, for program of thought, how often
the first program runs, how often the one retry rescues it, and how often both fail.

Demos: the ``--demos`` pool questions with the most question-word overlap (model-free, other documents
only), rendered by the solver's own ``as_demo`` (gold paragraphs only, to keep prompts short).

    python benchmarks/solver_smoke.py [--model local/qwen2.5-coder-0.5b-instruct] [--solver pot] [--n 20]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time

import knapsack_dspy  # noqa: F401  (environment defaults first)


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", text.lower()))


def pick_demos(query, pool, k: int):
    words = _words(query.question)
    scored = [(len(words & _words(ex.question)) / (len(words | _words(ex.question)) or 1), i)
              for i, ex in enumerate(pool) if ex.doc_id != query.doc_id]
    return [pool[i] for _, i in sorted(scored, reverse=True)[:k]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--solver", default="pot", choices=["pot", "cot", "few_shot", "zero_shot"])
    parser.add_argument("--n", type=int, default=20, help="questions (a seeded sample of dev_tune)")
    parser.add_argument("--demos", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--json", default=None, help="write per-question results here")
    args = parser.parse_args(argv)

    import dspy

    from knapsack_dspy.bench.scoring.example_scores import score_prediction
    from knapsack_dspy.docqa.data.loader import load_examples
    from knapsack_dspy.docqa.solvers import make_document_solver
    from knapsack_dspy.llm import make_lm

    pool = load_examples("tatqa", "dev_pool")
    queries = list(load_examples("tatqa", "dev_tune"))
    random.Random(args.seed).shuffle(queries)
    queries = queries[: args.n]
    solver = make_document_solver(args.solver, demo_paragraphs="gold")
    dspy.configure(lm=make_lm(args.model, max_tokens=args.max_tokens, cache=False), adapter=dspy.ChatAdapter())

    rows = []
    started = time.perf_counter()
    for query in queries:
        demos = [solver.as_demo(ex) for ex in pick_demos(query, pool, args.demos)]
        t0 = time.perf_counter()
        try:
            pred = solver(question=query.question, table=query.table, paragraphs=query.paragraphs, demos=demos)
        except Exception as exc:  # noqa: BLE001 -- an LM transport error is recorded, the run goes on
            rows.append({"id": query.id, "lm_error": f"{type(exc).__name__}: {exc}"[:300], "em": 0.0, "f1": 0.0})
            continue
        answer = pred.answer
        scores = score_prediction(query, pred)
        em, f1 = scores["em"], scores["f1"]
        rows.append({"id": query.id, "answer_type": query.answer_type, "gold": query.answer,
                     "gold_scale": query.scale, "answer": answer, "scale": pred.get("scale"), "em": em, "f1": f1,
                     "attempts": pred.get("attempts"), "error": pred.get("error"),
                     "program": pred.get("program"), "seconds": round(time.perf_counter() - t0, 1)})
    seconds = time.perf_counter() - started
    n = len(rows)
    summary = {"model": args.model, "solver": args.solver, "questions": n, "demos": args.demos,
               "exact_match": round(100 * sum(r["em"] for r in rows) / n, 1),
               "f1": round(100 * sum(r["f1"] for r in rows) / n, 1),
               "lm_errors": sum("lm_error" in r for r in rows), "seconds_per_question": round(seconds / n, 1)}
    if args.solver == "pot":
        answered = [r for r in rows if "lm_error" not in r]
        summary.update(first_program_ran=sum(r["attempts"] == 1 and r["error"] is None for r in answered),
                       rescued_by_retry=sum(r["attempts"] == 2 and r["error"] is None for r in answered),
                       both_failed=sum(r["error"] is not None for r in answered))
    print(json.dumps(summary, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"summary": summary, "questions": rows}, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
