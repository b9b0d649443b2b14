"""``kdspy compile``: compile a pipeline's exemplar selection against a pool and a validation split."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from knapsack_dspy.cli.common import (
    ShownWhenAsked,
    add_data_options,
    add_lm_options,
    add_mlflow_options,
    base_selection_config,
    given,
    mlflow_session,
    parse_list,
    parse_settings,
    registered_selectors,
    registered_tasks,
    resolve_data_dir,
    selection_default,
    setup_caches,
)
from knapsack_dspy.cli.main import UserError

#: The options that set a ``SelectionConfig`` setting of the same name: their defaults are ``SelectionConfig``'s
#: (``selection_default``); an option not given leaves the setting at that default. ``--setting`` sets any other.
SELECTION_OPTIONS = ("budget", "exemplar_budget", "max_exemplars", "alpha", "beta", "attributes", "attribute_source",
                     "val_size", "latency_budget", "demo_order")

EPILOG = """examples:
  kdspy compile --dataset tatqa --pipeline pot --selector seer --budget 2048 -o prog.json
  kdspy compile --dataset tatqa --pipeline pot --selector seer --exemplar-budget 1024 -o seer_l1024.json
  kdspy compile --dataset tatqa --pipeline pot --mode static --max-exemplars 4 -o static.json
  kdspy compile --dataset tatqa --pipeline pot --mode hybrid --budget 2048 --latency-budget 10 -o fast.json
  kdspy compile --dataset tatqa --pipeline pot --search --lm openai/gpt-4o-mini -o tuned.json
  kdspy compile --dataset tatqa --selector kate --setting knn_k=100 \\
                --setting 'selector_params={"respect_budget": true}' -o kate.json

The pool (trainset) supplies the exemplars; the validation split drives the search. The program JSON
and a compile report (PROG.report.json: configs tried, proxy / LM scores, the choice, attribute
predictor accuracy, LM calls and seconds) are written side by side. --mlflow logs the compile as an
MLflow run (options, cost and choices, the program and its report) to a local store beside the program
(mlruns/) or to URI.
"""


def register(subparsers) -> None:
    p = subparsers.add_parser("compile", help="compile a program (knapsack exemplar selection) to JSON",
                              description=__doc__, epilog=EPILOG,
                              formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    dataset = p.add_argument("--dataset", default="tatqa",
                             help="a registered task: %(registered)s (default %(default)s)")
    dataset.registered = ShownWhenAsked(registered_tasks)  # the tasks found, read when help is shown
    p.add_argument("--pipeline", default="pot", help="pot (program of thought, default: Python; the FinQA DSL is "
                   "finqa_pot), python_pot, cot, few_shot, zero_shot")
    p.add_argument("--route", default="auto", choices=["auto", "extract_compute", "none"],
                   help="extract_compute: span questions extracted, the others answered by the program; none: one "
                        "solver; auto (default): extract_compute for TAT-QA's pot pipeline (the measured best), "
                        "none otherwise")
    p.add_argument("--demo-table", default="auto", choices=["auto", "all", "gold_rows"],
                   help="what a TAT-QA demo's table shows: gold_rows, the header rows and the rows its gold solution "
                        "reads; all, the whole table; auto (default): gold_rows for TAT-QA's pot pipeline (the "
                        "measured fewest-token setting), all otherwise")
    p.add_argument("--evidence-selection", default="rules", choices=["rules", "knapsack"],
                   help="how a query's evidence is chosen: rules (default: the top paragraphs, the whole table unless "
                        "long) or knapsack (the document's rows and paragraphs -- SARA: its statute subsections -- "
                        "chosen with the demos in one knapsack)")
    p.add_argument("--demo-paragraphs", default="auto", choices=["auto", "all", "gold"],
                   help="what a TAT-QA demo's text shows: gold, its evidence paragraphs; all, what its retrieval "
                        "keeps; auto (default): gold for TAT-QA's pot pipeline, all otherwise")
    selector = p.add_argument("--selector", default=selection_default("selector"),
                              help="%(registered)s, or one added with register_selector or an installed package's "
                                   "knapsack_dspy.selectors entry point (default %(default)s)")
    selector.registered = ShownWhenAsked(registered_selectors)  # the registry's names, read when help is shown
    p.add_argument("--mode", default=None,
                   help="per_query: a knapsack per question (SEER); static: one set chosen at compile time; "
                        "hybrid: a static core plus per-query slots (chooses the selector unless --selector "
                        "names one that selects in that mode)")
    p.add_argument("--budget", type=int, default=selection_default("budget"),
                   help="prompt token budget (default %(default)s: the model's context window)")
    p.add_argument("--exemplar-budget", type=int, default=selection_default("exemplar_budget"), metavar="TOKENS",
                   help="the exemplars' own token budget (SEER's L), beside --budget: a query's exemplars get at "
                        "most min(budget - query prompt - output reserve, TOKENS) (default %(default)s: none)")
    p.add_argument("--max-exemplars", "-M", type=int, default=selection_default("max_exemplars"),
                   help="most exemplars per prompt (default %(default)s)")
    p.add_argument("--alpha", type=float, default=selection_default("alpha"),
                   help="share of exemplars with the predicted attribute value (default %(default)s)")
    p.add_argument("--beta", type=float, default=selection_default("beta"),
                   help="share of exemplars with other values (default %(default)s)")
    p.add_argument("--attributes", default=selection_default("attributes"),
                   help="constrained attributes, e.g. modality,answer_type (default %(default)s)")
    p.add_argument("--attribute-source", default=selection_default("attribute_source"),
                   choices=["classifier", "lm", "gold", "none"],
                   help="how a question's attributes are predicted (default %(default)s: the selector's own, "
                        "classifier but for seer_gold)")
    p.add_argument("--pool-split", help="exemplar pool split (TAT-QA default dev_pool)")
    p.add_argument("--pool", metavar="PATH", help="exemplar pool file instead of a split (FinQA: required)")
    p.add_argument("--val-split", help="validation split (TAT-QA default dev_tune)")
    p.add_argument("--val", metavar="PATH", help="validation file instead of a split")
    p.add_argument("--val-size", type=int, default=selection_default("val_size"),
                   help="validation questions used by the search (default %(default)s)")
    p.add_argument("--latency-budget", type=float, default=selection_default("latency_budget"), metavar="SECONDS",
                   help="the exemplars must also fit this many seconds per call, predicted from the model's measured "
                        "prefill / decode rates with the shared prefix (system message, a static set or hybrid core) "
                        "taken as cached (docs/throughput.md; default %(default)s: no latency budget)")
    p.add_argument("--latency-rates", default=None, metavar="PREFILL,DECODE[,OVERHEAD]",
                   help="tokens per second of prompt processing and of generation (and a call's fixed seconds) that "
                        "--latency-budget prices with; needed for models without measured rates (all but local/)")
    p.add_argument("--demo-order", default=selection_default("demo_order"), choices=["similarity", "canonical"],
                   help="per-query demos by similarity or in one order over the pool (prompt-cache reuse; "
                        "default %(default)s)")
    p.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                   help="any selection setting by its SelectionConfig name (knn_k, max_per_doc, core_size, seed, "
                        "embed_fields, shared_fields, exclude_same_doc, selector_params, reserve_output_tokens, ...; "
                        "docs/core.md); VALUE is JSON when it parses (100, true, [\"question\"], {\"k\": 1}), else "
                        "text; repeatable; applied after the options above")
    p.add_argument("--search", action="store_true",
                   help="search alpha in {0.5,0.75,1}, beta in {0,0.25}, M in {2,4,6}: proxies first, then the LM on "
                        "the best --lm-configs")
    p.add_argument("--lm-configs", type=int, default=0,
                   help="configs LM-evaluated in the search (default 0: model-free proxies only, no LM calls)")
    p.add_argument("--top-n-paragraphs", type=int, default=3, help="paragraphs kept by the retriever (default 3)")
    p.add_argument("-o", "--output", required=True, help="program JSON to write")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    add_lm_options(p)
    add_mlflow_options(p, "the program's folder")
    add_data_options(p)
    p.set_defaults(func=run)


def _latency_rates(args, latency_budget: float | None) -> dict | None:
    """``--latency-rates`` as ``SelectionConfig.latency_rates``; a ``UserError`` when a latency budget has no rates."""
    from knapsack_dspy.llm.latency_rates import latency_rates

    if args.latency_rates is None:
        if latency_budget is not None and latency_rates(args.lm) is None:
            raise UserError(f"--latency-budget: no measured prefill / decode rates for {args.lm}; give them with "
                            "--latency-rates PREFILL,DECODE[,OVERHEAD] (tokens per second, seconds)")
        return None
    try:
        values = [float(x) for x in args.latency_rates.split(",")]
    except ValueError:
        values = []
    if len(values) not in (2, 3):
        raise UserError(f"--latency-rates {args.latency_rates!r}: expected PREFILL,DECODE[,OVERHEAD], e.g. 65,21.4,0.3")
    return dict(zip(("prefill_tokens_per_s", "decode_tokens_per_s", "overhead_s"), values, strict=False))


def _selection_config(args):
    """The ``SelectionConfig`` the options describe: the commands' defaults (``base_selection_config``), the options
    given, then ``--setting``; a bad setting is a ``ValueError`` naming it."""
    from knapsack_dspy.selection.selectors import selector_for_mode

    settings = given(args, SELECTION_OPTIONS)
    if "attributes" in settings:
        settings["attributes"] = tuple(parse_list(settings["attributes"]))
    chosen = given(args, ["selector"]).get("selector")
    settings["selector"] = selector_for_mode(args.mode, chosen)
    settings.update(parse_settings(args.setting))
    if "latency_rates" not in settings:  # --setting latency_rates={...} gives them another way
        rates = _latency_rates(args, settings.get("latency_budget"))
        if rates is not None:
            settings["latency_rates"] = rates
    return base_selection_config().with_settings(**settings)


def run(args) -> int:
    from knapsack_dspy.docqa.data import DataError, load_examples
    from knapsack_dspy.docqa.pipelines.pipeline import save_program
    from knapsack_dspy.docqa.tasks import UnknownTaskError, build_pipeline, task_named
    from knapsack_dspy.teleprompt.knapsack_few_shot import CompileError, KnapsackFewShot

    uses_lm = bool(args.search and args.lm_configs > 0)  # otherwise compiling calls no LM: LiteLLM stays unloaded
    setup_caches(args, lm=uses_lm)
    if args.api_base:  # the model's server counts its tokens (when it can), whether or not an LM is called
        from knapsack_dspy.llm.served_models import note_served_model

        note_served_model(args.lm, args.api_base)
    data_dir = resolve_data_dir(args)
    try:
        pool_split, val_split = task_named(args.dataset).compile_splits
    except UnknownTaskError as exc:
        raise UserError(str(exc)) from None
    try:
        pool = (load_examples(args.dataset, path=args.pool) if args.pool
                else load_examples(args.dataset, split=args.pool_split or pool_split, data_dir=data_dir))
        val = (load_examples(args.dataset, path=args.val) if args.val
               else load_examples(args.dataset, split=args.val_split or val_split, data_dir=data_dir))
    except (DataError, FileNotFoundError, ValueError) as exc:
        raise UserError(str(exc)) from None
    for examples, what in ((pool, "pool"), (val, "validation")):
        if not examples:
            raise UserError(f"{examples.report.source}: no {args.dataset} examples for the {what}")
    try:
        selection = _selection_config(args)
        student = build_pipeline(dataset=args.dataset, pipeline=args.pipeline, selection=selection,
                                 top_n_paragraphs=args.top_n_paragraphs, model=args.lm,
                                 route=None if args.route == "none" else args.route,
                                 demo_table=args.demo_table, demo_paragraphs=args.demo_paragraphs,
                                 **({"evidence_selection": args.evidence_selection}
                                    if args.evidence_selection != "rules" else {}))
    except ValueError as exc:
        raise UserError(str(exc)) from None
    metric = None
    if uses_lm:
        import dspy

        from knapsack_dspy.bench.scoring.example_scores import correctness_metric
        from knapsack_dspy.cli.common import build_lm

        dspy.configure(lm=build_lm(args))
        metric = correctness_metric
    search_space = ({"alpha": [0.5, 0.75, 1.0], "beta": [0.0, 0.25], "max_exemplars": [2, 4, 6]}
                    if args.search else None)
    tele = KnapsackFewShot(metric=metric, search_space=search_space, max_lm_configs=args.lm_configs,
                           token_counter=student.token_counter, lm_model=args.lm, progress=not args.quiet)
    out = Path(args.output)
    with mlflow_session(args, out.resolve().parent, experiment="kdspy compile", run_name=out.stem,
                        tags={"kdspy.command": "compile"}, compile_traces=True) as tracking:
        try:
            program = tele.compile(student, trainset=pool, valset=val)
        except (CompileError, ValueError) as exc:
            raise UserError(str(exc)) from None
        save_program(program, out)
        report = program.compile_report
        if tracking is not None:
            from knapsack_dspy.bench.reporting.mlflow_tracking import log_compile

            options = {k: v for k, v in vars(args).items() if k not in ("func", "command", "mlflow_traces")
                       and v is not None}
            log_compile(out, report, options)
    for name, part in report["predictors"].items():
        print(f"compiled {args.dataset}/{args.pipeline} ({name}) with selector {part['selector']} ({part['mode']}): "
              f"pool {part['pool_size']}, budget {part['budget']} tokens ({part['token_model']})"
              + (f", exemplars within {part['exemplar_budget']} tokens" if part.get("exemplar_budget") else ""))
        print(f"chosen config: {json.dumps(part['chosen'])}")
        if part.get("candidate_search"):
            print(f"candidates: {part['candidate_search']}")
        for attr, acc in part.get("attribute_accuracy", {}).items():
            print(f"attribute {attr}: {acc['source']} accuracy {100 * acc['accuracy']:.1f}% "
                  f"on {acc['n']} validation questions")
    cost = report["cost"]
    print(f"compile cost: {cost['lm_calls']} LM calls ({cost['lm_cache_hits']} answered from the cache), "
          f"{cost['prompt_tokens']} prompt + {cost['completion_tokens']} completion tokens, "
          f"${cost['cost_usd']:.4f}, {cost['seconds']} s")
    print(f"wrote {out} and {out.with_suffix('.report.json')}", file=sys.stderr)
    return 0
