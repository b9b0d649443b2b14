"""Does reusing llama.cpp's KV cache change greedy output? The same prompts with and without prompt-cache reuse.

The questions' first prompts (rendered by the current code, ``prompt_capture.first_prompt``; TAT-QA dev_tune in
the order ``kdspy bench`` answers them) are sent to the embedded model twice, greedy (temperature 0), through its
server directly (no DSPy cache in between):

- pass A, in order with llama.cpp's default ``cache_prompt``: each prompt reuses the prefix it shares with the
  previous one (``cache_n`` tokens, recorded);
- pass B, ``cache_prompt: false``: every prompt processed from scratch.

Replies are compared character by character; where they differ, the programs are executed on the question's
table and the answers compared. llama.cpp has had reports of reuse changing greedy output (batch boundaries
change floating-point summation order); this measures it here.

    python experiments/throughput/kv_reuse_greedy.py --model local/qwen2.5-coder-0.5b-instruct --limit 10
    python experiments/throughput/kv_reuse_greedy.py --model local/qwen2.5-coder-1.5b-instruct --limit 100 --json kv.json

LM time: 2 x limit completions (0.5B: ~1 min per question on 2 busy cores; 1.5B: ~1-2 min per question,
quiet machine, pass B without reuse being the slower half).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import knapsack_dspy  # noqa: F401  # isort: skip  (environment defaults first)
from knapsack_dspy.bench.execution.question_order import cache_friendly_order
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.docqa.solvers.program_of_thought_answerer import clean_program_text
from knapsack_dspy.llm.local_server import get_local_server
from knapsack_dspy.testing.json_result import print_and_save
from knapsack_dspy.testing.prompt_capture import compiled, first_prompt, spec_for


def _answer(reply: str, example) -> object:
    """What the reply's program computes on the question's table (None if it does not run)."""
    body = reply.split("[[ ## program ## ]]", 1)[-1].split("[[ ## completed ## ]]", 1)[0]
    result = execute_program(clean_program_text(body), [list(r) for r in example.get("table") or []],
                             kind="python", time_limit=1.0)
    return result.answer if result.ok else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct", help="the embedded model to ask")
    parser.add_argument("--limit", type=int, default=10, help="the first N dev_tune questions")
    parser.add_argument("--mode", default="seer", choices=("seer", "hybrid", "static"))
    parser.add_argument("--max-tokens", type=int, default=384, help="as the bench's RunSpec.max_tokens")
    parser.add_argument("--out", default=str(Path(tempfile.gettempdir()) / "kdspy-prefix-reuse"),
                        help="where compiled programs are kept")
    parser.add_argument("--json", help="write every question's replies and the comparison here")
    args = parser.parse_args(argv)
    program, evalset = compiled(spec_for(args.mode), args.out)
    examples = cache_friendly_order(program, evalset[: args.limit])
    prompts = [first_prompt(program, example) for example in examples]
    server = get_local_server(args.model)
    passes = {}
    for name, reuse in (("reuse", True), ("no_reuse", False)):
        replies = []
        for messages in prompts:
            started = time.perf_counter()
            result = server.chat({"messages": messages, "temperature": 0.0, "max_tokens": args.max_tokens,
                                  "cache_prompt": reuse})
            if "error" in result:
                raise RuntimeError(f"completion failed: {result['error']}")
            timings = result.get("timings") or {}
            replies.append({"text": result["choices"][0]["message"].get("content") or "",
                            "cache_n": timings.get("cache_n"), "prompt_n": timings.get("prompt_n"),
                            "seconds": round(time.perf_counter() - started, 2)})
            print(f"{name}: {len(replies)}/{len(prompts)} ({replies[-1]['seconds']} s, "
                  f"{replies[-1]['cache_n']} tokens reused)", file=sys.stderr, flush=True)
        passes[name] = replies
    rows = []
    for example, a, b in zip(examples, passes["reuse"], passes["no_reuse"], strict=True):
        same = a["text"] == b["text"]
        row = {"example_id": example.id, "identical": same, "reused_tokens": a["cache_n"],
               "seconds_with_reuse": a["seconds"], "seconds_without": b["seconds"]}
        if not same:
            first = next((i for i, (x, y) in enumerate(zip(a["text"], b["text"], strict=False)) if x != y),
                         min(len(a["text"]), len(b["text"])))
            answers = (_answer(a["text"], example), _answer(b["text"], example))
            row.update(first_difference_at=first, answers=[str(x) for x in answers],
                       same_answer=answers[0] == answers[1], reply_with_reuse=a["text"], reply_without=b["text"])
        rows.append(row)
    summary = {"model": args.model, "mode": args.mode, "questions": len(rows),
               "identical_replies": sum(r["identical"] for r in rows),
               "different_answers": sum(not r.get("same_answer", True) for r in rows),
               "reused_tokens_mean": round(sum(r["reused_tokens"] or 0 for r in rows) / max(1, len(rows)), 1),
               "seconds_with_reuse": round(sum(r["seconds_with_reuse"] for r in rows), 1),
               "seconds_without": round(sum(r["seconds_without"] for r in rows), 1)}
    print_and_save(summary, args.json, saved={"summary": summary, "rows": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())
