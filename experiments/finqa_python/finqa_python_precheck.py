"""FinQA in Python, checked before the LM run (issue 37; no LM): the pool demos' Python, and the prompts' tokens.

1. **Demos.** Every pool record as a ``python_pot`` demo shows it (its document cut to the evidence its gold
   program reads, ``DocumentQA._demo_retrieved``; the gold DSL program written as Python over those cells,
   ``data.gold_programs``, in the literal style the prompt shows, ``data.program_style``) is executed in the
   sandbox on the demo's table and compared with the record's ``exe_ans`` by the official FinQA comparison
   (``metrics.answer_matching.finqa_exact_match``: the value rounded to 5 decimals ``==`` ``exe_ans``; yes / no as
   text). A record whose program cannot be written, or whose written program the strict checks reject, shows its
   literal answer (``ans = 0.1234``): counted apart, with the reason. The look-up style (``table["row",
   "col"]``) is checked too, and the DSL demo the same way.
2. **Prompt tokens** (the run's model's tokenizer, counted as the bench counts them: ``SelectExemplars``' cost
   model, tables shared by the demos of one page). Both programs are compiled LM-free as
   ``benchmarks/finqa_python.toml``'s KATE-within-budget run (budget 2,048, M = 4, document pool): the DSL
   (``finqa_pot``) selects each question's exemplars; the Python prompt of **the same question and the same
   exemplars** is counted by a stand-in selector that returns those exemplars; and Python's own KATE-within-budget
   selection (what its LM run will send) beside them. With ``--dsl-rows`` the DSL selection is checked against
   the exemplars and prompt tokens the committed DSL rows recorded.

    python experiments/finqa_python/finqa_python_precheck.py [--suite benchmarks/finqa_python.toml] [--json OUT]
        [--dsl-rows benchmarks/results/finqa_tune_1p5b] [--programs DIR] [--failures 10]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import tempfile
from collections import Counter
from pathlib import Path

import knapsack_dspy  # noqa: F401  (first: LiteLLM then loads with its bundled model map, _env.py)
from knapsack_dspy.bench.programs.run_program import compile_program
from knapsack_dspy.bench.results.store import ResultsFileError, load_rows
from knapsack_dspy.bench.suites.chosen_questions import chosen_examples, load_split
from knapsack_dspy.bench.suites.suite import load_suite
from knapsack_dspy.docqa.data.gold_programs import synthesise_python_program
from knapsack_dspy.docqa.data.program_style import as_literal_program
from knapsack_dspy.docqa.metrics.answer_matching import finqa_exact_match
from knapsack_dspy.docqa.sandbox import execute_program
from knapsack_dspy.selection.exemplar_pool import make_selection, query_values
from knapsack_dspy.selection.selectors.base import ExemplarSelector

ROOT = Path(__file__).resolve().parents[2]  # the repository: this file is experiments/finqa_python/
SELECTOR = "kate_within_budget"


# ---------------------------------------------------------------------------------------------------------------
# 1. the demos

def _runs_to(code: str, table, exe_ans, kind: str = "python") -> tuple[bool, str]:
    """Whether ``code`` executes on ``table`` to ``exe_ans`` by the official comparison; else why not."""
    result = execute_program(code, table or None, kind=kind)
    if not result.ok:
        return False, f"does not run: {result.error}"
    if not finqa_exact_match(result.answer, exe_ans):
        return False, f"gives {result.answer!r}, exe_ans {exe_ans!r}"
    return True, ""


def check_demo(example, shown: dict) -> dict:
    """One pool record as its demo shows it (``shown``: the record's fields with the demo's cut ``table`` and
    ``paragraphs``): ``{"id", "written", "reason", "literal", "lookup", "dsl", "why"}`` -- ``written``: a gold
    Python program (not the literal answer); ``literal`` / ``lookup`` / ``dsl``: that form of the program runs to
    ``exe_ans`` (official comparison); ``why``: the first failure's reason."""
    fields = {**dict(example), **shown}
    table = [list(row) for row in fields.get("table") or []]
    exe_ans = fields.get("answer")
    gold = synthesise_python_program(fields)
    out = {"id": fields.get("id"), "written": gold.verified, "reason": gold.reason, "why": ""}
    if gold.verified:
        out["literal"], why_literal = _runs_to(as_literal_program(gold.code, table), table, exe_ans)
        out["lookup"], why_lookup = _runs_to(gold.code, table, exe_ans)
        out["why"] = why_literal or why_lookup
    else:
        out["literal"] = out["lookup"] = False
        out["why"] = f"no Python program: {gold.reason}"
    out["dsl"], why_dsl = _runs_to(fields.get("program") or "", table, exe_ans, kind="finqa")
    if not out["why"] and why_dsl:
        out["why"] = f"DSL {why_dsl}"
    return out


def demo_report(program, pool) -> dict:
    """:func:`check_demo` over the pool (``program``: a compiled or uncompiled FinQA ``python_pot`` DocumentQA);
    the demo the program renders must show the program checked (else the check is not of what the prompt shows)."""
    checks, mismatched = [], []
    for example in pool:
        shown = program._demo_retrieved(example)
        check = check_demo(example, shown)
        rendered = program.render_demo(example)["program"]
        table = [list(row) for row in shown.get("table") or []]
        expected = as_literal_program(synthesise_python_program({**dict(example), **shown}).code, table)
        if rendered != expected:
            mismatched.append(check["id"])
        checks.append(check)
    count = Counter()
    for check in checks:
        count["written"] += check["written"]
        count["literal"] += check["literal"]
        count["lookup"] += check["lookup"]
        count["dsl"] += check["dsl"]
    failures = [(c["id"], c["why"]) for c in checks if not (c["written"] and c["literal"] and c["lookup"])]
    return {"total": len(checks), **{k: count[k] for k in ("written", "literal", "lookup", "dsl")},
            "failures": failures, "rendered_differs": mismatched}


# ---------------------------------------------------------------------------------------------------------------
# 2. prompt tokens

class GivenExemplars(ExemplarSelector):
    """A stand-in selector that returns the exemplars named in ``ids`` (set before each query), in the prompt order
    every selector's selection has (``make_selection``), so their prompt is counted as the bench counts it."""

    name = "given"
    respects_budget = False

    def __init__(self, max_exemplars: int = 8):
        super().__init__(max_exemplars)
        self.ids: list[str] = []

    def select(self, pool, request):
        return make_selection(pool, request, pool.index_of(self.ids), query_values(pool, request))


def selections(program, questions) -> list[dict]:
    """The selection info (ids, prompt_tokens, within_budget, ...) of each question."""
    return [program.select_for(example) for example in questions]


def with_given_exemplars(program, questions, ids_per_question: list[list[str]]) -> list[dict]:
    """The selection info of each question when ``program`` sends the exemplars given for it."""
    select, given = program.select, GivenExemplars()
    kept = select._selector()  # the run's own selector, put back afterwards
    select._selector_obj = given
    try:
        out = []
        for example, ids in zip(questions, ids_per_question, strict=True):
            given.ids = list(ids)
            out.append(program.select_for(example))
        return out
    finally:
        select._selector_obj = kept


def _mean(values) -> float | None:
    values = list(values)
    return statistics.fmean(values) if values else None


def token_report(dsl: list[dict], same: list[dict], own: list[dict]) -> dict:
    """Mean prompt tokens, exemplars and the share within budget of the three prompts of each question."""
    def part(infos):
        return {"prompt_tokens": _mean(i["prompt_tokens"] for i in infos),
                "exemplars": _mean(len(i["ids"]) for i in infos),
                "within_budget": sum(bool(i.get("within_budget")) for i in infos)}
    ratios = [p["prompt_tokens"] / d["prompt_tokens"] for d, p in zip(dsl, same, strict=True)]
    extra = [p["prompt_tokens"] - d["prompt_tokens"] for d, p in zip(dsl, same, strict=True)]
    return {"n": len(dsl), "dsl": part(dsl), "python_same_exemplars": part(same), "python_own_selection": part(own),
            "python_minus_dsl_same_exemplars": _mean(extra), "python_over_dsl_same_exemplars": _mean(ratios),
            "python_own_same_set": sum(set(o["ids"]) == set(d["ids"]) for o, d in zip(own, dsl, strict=True))}


def committed_agreement(dsl: list[dict], questions, rows_dir: Path, spec) -> dict:
    """How many of the DSL selections made now are the exemplars (and prompt tokens) the committed DSL rows of the
    same run (selector, budget, M, pool, no exemplar budget) recorded."""
    try:
        rows = [row for row in load_rows(rows_dir)
                if row.spec.get("pipeline") == "finqa_pot" and row.spec.get("selector") == spec.selector
                and row.spec.get("budget") == spec.budget and row.spec.get("max_exemplars") == spec.max_exemplars
                and row.spec.get("pool_split") == spec.pool_split and not row.spec.get("exemplar_budget")
                and not row.spec.get("selection_only") and not row.spec.get("selector_params")]
    except ResultsFileError as exc:
        sys.exit(f"finqa_python_precheck: {exc}")
    by_id = {row.example_id: row for row in rows}
    same_ids = same_tokens = found = 0
    for example, info in zip(questions, dsl, strict=True):
        row = by_id.get(example.id)
        if row is None:
            continue
        found += 1
        same_ids += list(row.exemplar_ids) == list(info["ids"])
        same_tokens += row.prompt_tokens == info["prompt_tokens"]
    return {"rows": found, "same_exemplars": same_ids, "same_prompt_tokens": same_tokens,
            "committed_prompt_tokens": _mean(by_id[e.id].prompt_tokens for e in questions if e.id in by_id)}


# ---------------------------------------------------------------------------------------------------------------

def _fmt(value, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", type=Path, default=ROOT / "benchmarks" / "finqa_python.toml")
    parser.add_argument("--dsl-rows", type=Path, default=ROOT / "benchmarks" / "results" / "finqa_tune_1p5b",
                        help="the committed DSL rows to check the DSL selection against ('' to skip)")
    parser.add_argument("--programs", type=Path, default=None,
                        help="where the compiled programs go (default: a temporary directory)")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--failures", type=int, default=10, help="demo failures to list")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures as JSON")
    args = parser.parse_args(argv)

    suite = load_suite(args.suite)
    specs = [run for run in suite.runs if run.selector == SELECTOR and run.pipeline == "python_pot"]
    if not specs:
        sys.exit(f"finqa_python_precheck: no python_pot {SELECTOR} run in {args.suite}")
    python_spec = dataclasses.replace(specs[0], selection_only=True)
    dsl_spec = dataclasses.replace(python_spec, pipeline="finqa_pot")
    pool = load_split(python_spec, "pool", args.data_dir)
    questions = chosen_examples(load_split(python_spec, "eval", args.data_dir), python_spec)

    with tempfile.TemporaryDirectory() as scratch:
        out_dir = args.programs or Path(scratch)
        python_program, _ = compile_program(python_spec, pool, None, out_dir, progress=False)
        dsl_program, _ = compile_program(dsl_spec, pool, None, out_dir, progress=False)

    demos = demo_report(python_program, pool)
    print(f"FinQA {python_spec.pool_split} demos (python_pot, {python_spec.dataset}): {demos['total']} records")
    print(f"  a gold Python program written (not the literal answer): {demos['written']}/{demos['total']}")
    print(f"  its literal-style program (the prompt's) runs to exe_ans, official comparison: "
          f"{demos['literal']}/{demos['total']}")
    print(f"  its look-up-style program (table[row, col]) runs to exe_ans: {demos['lookup']}/{demos['total']}")
    print(f"  the DSL program on the same cut table runs to exe_ans: {demos['dsl']}/{demos['total']}")
    if demos["rendered_differs"]:
        print(f"  WARNING: {len(demos['rendered_differs'])} rendered demos show another program than the one "
              f"checked, e.g. {demos['rendered_differs'][0]}")
    for record_id, why in demos["failures"][: args.failures]:
        print(f"  cannot be shown as Python running to exe_ans: {record_id}: {why}")

    dsl = selections(dsl_program, questions)
    own = selections(python_program, questions)
    same = with_given_exemplars(python_program, questions, [info["ids"] for info in dsl])
    tokens = token_report(dsl, same, own)
    spec = python_spec
    print(f"\nPrompt tokens ({spec.model}'s tokenizer), {len(questions)} questions of {spec.dataset} "
          f"{spec.eval_split} (order_seed {spec.order_seed}), budget {spec.budget}, M = {spec.max_exemplars}, "
          f"{SELECTOR}, pool {spec.pool_split}:")
    print("| prompt | prompt tokens (mean) | exemplars (mean) | within budget |")
    print("|---|---|---|---|")
    for label, key in (("DSL (finqa_pot), its selection", "dsl"),
                       ("Python, the DSL's exemplars", "python_same_exemplars"),
                       ("Python, its own selection", "python_own_selection")):
        part = tokens[key]
        print(f"| {label} | {_fmt(part['prompt_tokens'])} | {_fmt(part['exemplars'], 2)} | "
              f"{part['within_budget']}/{tokens['n']} |")
    print(f"Python − DSL, same question and exemplars: {tokens['python_minus_dsl_same_exemplars']:+.1f} tokens "
          f"(x{tokens['python_over_dsl_same_exemplars']:.3f}); Python's own selection is the DSL's set for "
          f"{tokens['python_own_same_set']}/{tokens['n']} questions")
    result = {"demos": demos, "tokens": tokens}
    if str(args.dsl_rows) and args.dsl_rows.exists():
        agreement = committed_agreement(dsl, questions, args.dsl_rows, dsl_spec)
        result["committed_dsl_rows"] = agreement
        print(f"The DSL selection made now against the committed rows ({args.dsl_rows}): the same exemplars for "
              f"{agreement['same_exemplars']}/{agreement['rows']}, the same prompt tokens for "
              f"{agreement['same_prompt_tokens']}/{agreement['rows']} (their mean "
              f"{_fmt(agreement['committed_prompt_tokens'])})")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
