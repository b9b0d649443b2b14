# ruff: noqa: E402  (diagnostic scripts as they were run; see README.md)
import argparse
import cProfile
import itertools
import pstats
import sys

sys.path.insert(0, "benchmarks")
import pool_scale as ps

args = argparse.Namespace(queries_from="dev_tune", queries=5, counter="local/qwen2.5-coder-1.5b-instruct")
real = ps.real_pool(args)
import tempfile

import diskcache

from knapsack_dspy.llm.bpe_tokenizer import bpe_encoding
from knapsack_dspy.llm.token_counter import get_token_counter
from knapsack_dspy.modules.compiled_programs import predictor_at
from knapsack_dspy.modules.prompt_cost import PromptCostModel, pinned_adapter

signature = predictor_at(real["student"], real["name"]).signature
demos = real["demos"]
counter = type(get_token_counter(args.counter))(args.counter)
counter._disk_cache = diskcache.Cache(tempfile.mkdtemp(prefix="counts-"))
server = counter._get_server()
bpe_encoding(server.model_path)
model = PromptCostModel(signature, counter, pinned_adapter())
model.demo_cost(demos[0])
copies = [
    {**d, "question": f"{d['question']} (copy {k // len(demos)})"} for k, d in zip(range(10000), itertools.cycle(demos))
]
cProfile.run("model.demo_costs(copies)", "../research/pc.out")
pstats.Stats("../research/pc.out").sort_stats("tottime").print_stats(18)
