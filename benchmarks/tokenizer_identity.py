"""Do the embedded 0.5B and 1.5B models tokenize identically? (Then the 0.5B counts tokens for the 1.5B.)

Three checks, none of which generates text:

1. the GGUF tokenizer metadata (``tokenizer.ggml.*``: vocabulary, token types, merges, special token ids,
   pre-tokenizer) hash to the same fingerprint, equal to the catalogue's ``LocalModelSpec.tokenizer``;
2. the chat templates: where they differ (line diff);
3. token ids on a corpus of real prompts: every TAT-QA pool exemplar rendered as a prompt (system message, the
   exemplar as a demo, the exemplar's question), templated and tokenized by both models' servers.

    python benchmarks/tokenizer_identity.py [--limit N] [--json out.json]

Loads both models (no completion is asked). Exit 1 if any check fails.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
import tempfile

import knapsack_dspy  # noqa: F401  # isort: skip  (environment defaults first)
from knapsack_dspy.llm.gguf_tokenizer import read_tokenizer_metadata, tokenizer_fingerprint
from knapsack_dspy.llm.local_models import local_model_spec
from knapsack_dspy.llm.local_server import get_local_server
from knapsack_dspy.llm.local_weights import ensure_local_weights
from knapsack_dspy.testing.json_result import print_and_save
from knapsack_dspy.testing.prompt_capture import BASE_SPEC, compiled

MODELS = ("local/qwen2.5-coder-0.5b-instruct", "local/qwen2.5-coder-1.5b-instruct")


def corpus(limit: int | None, out_dir: str) -> list[list[dict]]:
    """Every pool exemplar as a prompt: the writer's system message, the exemplar as a demo, its question."""
    program, _ = compiled(BASE_SPEC, out_dir)
    predictor = program.solve.predictor
    signature, adapter = predictor.signature, predictor.adapter
    select = program.select
    demos = select.demos[:limit] if limit else select.demos
    inputs = [k for k in signature.input_fields]
    return [adapter.format(signature, [demo], {k: demo.get(k, "") for k in inputs}) for demo in demos]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N pool exemplars (default all)")
    parser.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "kdspy-prefix-reuse"),
                        help="where the compiled program is kept (default: kdspy-prefix-reuse in the temporary folder)")
    parser.add_argument("--json", help="write the findings to this JSON file")
    args = parser.parse_args(argv)
    paths = {m: ensure_local_weights(m) for m in MODELS}
    report: dict = {"fingerprints": {m: tokenizer_fingerprint(p) for m, p in paths.items()},
                    "catalogue": {m: local_model_spec(m).tokenizer for m in MODELS}}
    report["same_tokenizer"] = (len(set(report["fingerprints"].values())) == 1
                                and report["fingerprints"] == report["catalogue"])
    templates = [read_tokenizer_metadata(p).get("tokenizer.chat_template", "") for p in paths.values()]
    report["chat_template_diff"] = [line for line in difflib.unified_diff(
        templates[0].splitlines(), templates[1].splitlines(), *MODELS, lineterm="", n=0)]
    servers = [get_local_server(m) for m in MODELS]
    prompts = corpus(args.limit, args.out)
    differing, tokens = [], 0
    for index, messages in enumerate(prompts):
        ids = [s.tokenize(s.apply_template(messages)) for s in servers]
        tokens += len(ids[0])
        if ids[0] != ids[1]:
            differing.append(index)
    report.update(prompts=len(prompts), tokens=tokens, prompts_with_different_ids=len(differing),
                  first_differing=differing[:10])
    print_and_save(report, args.json)
    return 0 if report["same_tokenizer"] and not differing else 1


if __name__ == "__main__":
    sys.exit(main())
