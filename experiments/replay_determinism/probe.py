"""Is greedy decoding of the embedded model a function of the prompt alone? Probe what changes a reply's numbers.

Asks the same prompts of one embedded model (default the 0.5B: the runtime is the same as the 1.5B's) with
``logprobs`` under several conditions and compares the returned log-probabilities of the reply's tokens exactly:

- ``no_cache``: ``cache_prompt = false`` (the whole prompt processed again), after an unrelated prompt -- the
  reference every other condition is compared with;
- ``no_cache_after_prefix``: the same after a prompt sharing a long prefix (is ``no_cache`` history-free?);
- ``fresh``: cached, after an unrelated prompt (only the chat template's first tokens are reused);
- ``again``: cached, right after itself (everything but the last token reused);
- ``after_prefix``: cached, after a prompt that shares a long prefix with it (what a bench's exemplar order gives);
- every condition with two generation threads and with one (the default follows the machine's load).

Prompts: chat prompts built from TAT-QA tuning questions with four pool questions before them as demos, so
consecutive prompts share their system message and some demos, as in a bench.

    python experiments/replay_determinism/probe.py [--model local/qwen2.5-coder-0.5b-instruct] [--prompts 6]
"""

from __future__ import annotations

import argparse
import json
import os
import random

import knapsack_dspy  # noqa: F401  (environment defaults first)


def build_prompts(count: int, seed: int = 0) -> list[list[dict]]:
    from knapsack_dspy.docqa.data.loader import load_examples

    pool = load_examples("tatqa", "dev_pool")
    tune = load_examples("tatqa", "dev_tune")
    rng = random.Random(seed)
    demos = rng.sample(list(pool), 12)
    system = ("Answer the question from the table and paragraphs. Write one Python expression that computes the "
              "answer, then the answer.")

    def demo(ex):
        table = "\n".join(" | ".join(row) for row in (ex.table or [])[:8])
        return [{"role": "user", "content": f"Table:\n{table}\nQuestion: {ex.question}"},
                {"role": "assistant", "content": f"Answer: {ex.answer}"}]

    prompts = []
    for k, ex in enumerate(rng.sample(list(tune), count)):
        chosen = demos[k % 3: k % 3 + 4]  # neighbours share three of four demos
        table = "\n".join(" | ".join(row) for row in (ex.table or [])[:12])
        messages = [{"role": "system", "content": system}]
        for d in chosen:
            messages += demo(d)
        messages.append({"role": "user", "content": f"Table:\n{table}\nQuestion: {ex.question}"})
        prompts.append(messages)
    return prompts


def ask(server, messages, *, cache=True, tokens=48):
    reply = server.chat({"messages": messages, "max_tokens": tokens, "temperature": 0.0, "logprobs": True,
                         "top_logprobs": 1, "cache_prompt": cache})
    choice = reply["choices"][0]
    probs = [item["logprob"] for item in (choice.get("logprobs") or {}).get("content") or []]
    return choice["message"]["content"], probs


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    from knapsack_dspy.llm import local_server

    prompts = build_prompts(args.prompts)
    unrelated = [{"role": "user", "content": "Say hello."}]
    results = []
    for threads in (2, 1):
        os.environ[local_server.THREADS_ENV] = str(threads)
        local_server._servers.clear()  # a new server with this many generation threads
        server = local_server.get_local_server(args.model)
        for k, messages in enumerate(prompts):
            neighbour = prompts[k - 1]
            runs = {}
            ask(server, unrelated, tokens=4)
            runs["no_cache"] = ask(server, messages, cache=False)
            ask(server, neighbour)
            runs["no_cache_after_prefix"] = ask(server, messages, cache=False)
            ask(server, unrelated, tokens=4)
            runs["fresh"] = ask(server, messages)
            runs["again"] = ask(server, messages)
            ask(server, neighbour)
            runs["after_prefix"] = ask(server, messages)
            base_text, base_probs = runs["no_cache"]
            row = {"prompt": k, "threads": threads, "logprobs": {name: probs for name, (_, probs) in runs.items()}}
            for name, (text, probs) in runs.items():
                row[name] = {"same_text": text == base_text, "same_logprobs": probs == base_probs,
                             "max_logprob_diff": max((abs(a - b) for a, b in zip(probs, base_probs, strict=False)),
                                                     default=0.0)}
            results.append(row)
            print(json.dumps({key: value for key, value in row.items() if key != "logprobs"}))
    # across thread counts: the same prompt and condition with two generation threads and with one
    for k in range(len(prompts)):
        two, one = (next(r for r in results if r["prompt"] == k and r["threads"] == t) for t in (2, 1))
        same = {name: two["logprobs"][name] == one["logprobs"][name] for name in two["logprobs"]}
        print(json.dumps({"prompt": k, "same_logprobs_with_2_and_1_threads": same}))
        results.append({"prompt": k, "same_logprobs_with_2_and_1_threads": same})
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
