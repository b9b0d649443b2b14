"""Tokens per TAT-QA demo and per prompt, before and after cutting demos to what their gold solution reads (no LM).

    kdspy bench benchmarks/tatqa_tokens_selection.toml --selection-only
    python experiments/tokens/tatqa_demo_tokens.py benchmarks/results/tatqa_tokens_selection [--json out.json]

For every run of the selection-only results directory: its compiled program (``<results>/programs/``, reloaded as
``kdspy report`` does) gives each demo predictor's pool -- the program writer's (every pool record) and, routed, the
extractor's (span questions) -- with each demo's tokens as the knapsack prices it, counted with the target model's
tokenizer in the real prompt format; a demo's own tokens are its cost plus its shared table's (``shared_fields``:
what it costs alone in a prompt). Its rows give the prompt tokens selection measured (question + demos), the
exemplars per prompt, the share within budget and the gold-case hit. Mean and median over the pool / the questions.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from knapsack_dspy.bench.programs.run_program import saved_program_path
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.docqa.pipelines.pipeline import load_program


def demo_tokens(selection) -> list[float]:
    """Each pool demo's tokens alone in a prompt: its cost plus its group's shared cost (its table)."""
    groups = selection.groups or [-1] * len(selection.costs)
    return [cost + (selection.group_costs[group] if group >= 0 else 0.0)
            for cost, group in zip(selection.costs, groups, strict=True)]


def _summary(values) -> dict:
    values = [float(v) for v in values]
    if not values:
        return {"n": 0, "mean": None, "median": None}
    return {"n": len(values), "mean": round(statistics.fmean(values), 1), "median": statistics.median(values)}


def _label(spec: dict) -> str:
    cut = [f"{k}={spec[k]}" for k in ("demo_table", "demo_paragraphs") if spec.get(k, "all") != "all"]
    if spec.get("demo_table", "all") != "all":
        cut.append(f"demo_table_rows={spec.get('demo_table_rows')}")
    return f"{spec.get('selector')} b{spec.get('budget')} m{spec.get('max_exemplars')} " + (
        ", ".join(cut) if cut else "full demos")


def measure(results_dir: Path) -> list[dict]:
    rows = load_rows(results_dir)
    by_run: dict[str, list] = defaultdict(list)
    for row in rows:
        by_run[row.run].append(row)
    out = []
    for run, run_rows in by_run.items():
        spec = run_rows[0].spec
        program = load_program(saved_program_path(results_dir, run, spec))
        demos = {name: _summary(demo_tokens(program.selection_of(program._predictor_name(solver))))
                 for name, solver in program.demo_solvers().items()}
        prompts = [r.prompt_tokens for r in run_rows if r.prompt_tokens is not None]
        out.append({
            "run": run, "label": _label(spec), "questions": len(run_rows),
            "demo_tokens": demos,
            "prompt_tokens": _summary(prompts),
            "exemplar_tokens": _summary(r.exemplar_tokens for r in run_rows if r.exemplar_tokens is not None),
            "exemplars_per_prompt": _summary(len(r.exemplar_ids) for r in run_rows),
            "within_budget": round(sum(bool(r.within_budget) for r in run_rows) / len(run_rows), 4),
            "gold_case_hit": round(sum(bool(r.gold_case_hit) for r in run_rows) / len(run_rows), 4),
        })
    return out


def distinct_prompts(results_dir: Path) -> int:
    """Prompts the directory's runs would send (a question with the same exemplars shown the same way is one prompt:
    an LM run answers it once per arm that shares it)."""
    cut = ("demo_table", "demo_table_rows", "demo_paragraphs", "route", "pipeline", "top_n_paragraphs")
    return len({(r.example_id, tuple(r.exemplar_ids), *(str(r.spec.get(k)) for k in cut))
                for r in load_rows(results_dir)})


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="a selection-only results directory")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    found = measure(args.results)
    for item in found:
        print(f"## {item['label']}  ({item['questions']} questions; run {item['run']})")
        for name, s in item["demo_tokens"].items():
            print(f"  tokens per demo, {name} pool ({s['n']} demos): mean {s['mean']}, median {s['median']}")
        for key in ("prompt_tokens", "exemplar_tokens", "exemplars_per_prompt"):
            s = item[key]
            print(f"  {key.replace('_', ' ')}: mean {s['mean']}, median {s['median']}")
        print(f"  within budget {item['within_budget']:.1%}, gold-case hit {item['gold_case_hit']:.1%}")
    prompts = distinct_prompts(args.results)
    print(f"distinct prompts over all runs: {prompts} ({sum(item['questions'] for item in found)} rows)")
    if args.json:
        args.json.write_text(json.dumps({"runs": found, "distinct_prompts": prompts}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
