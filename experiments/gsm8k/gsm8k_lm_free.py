"""Issue 39's LM-free figures: kinds derived for any program, and a budget that binds, on GSM8K.

1. The generic kind derivation (``attribute_classifier.derive_kinds``: k-means of the demos' output embeddings,
   k by its stated rule) on GSM8K's pool, as ``ChainOfThought("question -> answer")``'s demos show it (reasoning =
   the readable worked solution, answer): the number of kinds and exemplars per kind; then the kind classifier
   ``case_coverage`` learns (a logistic regression on the *question* embeddings, ``C = 16`` as the selector's) on a
   seeded 80 % of the pool, its accuracy on the other 20 % (their kinds: the nearest centroid of kinds derived on
   the 80 %) against the majority class; and the agreement (adjusted Rand index, NMI) of the derived kinds with
   GSM8K's own operation kinds (``tasks/gsm8k.operation_kind``, not used by the derivation).
2. The same derivation on TAT-QA's ``dev_pool`` with its labels hidden (outputs: a demo's derivation and answer),
   scored against the hand-made kinds (``pool_attributes.solution_kind``: program template, else answer type) and
   the answer types; the same held-out classifier figure.
3. ``benchmarks/gsm8k_selection.toml`` (selection only; run here into its results directory, resumable): for each
   budget and M, per selector, the prompts within the budget, mean exemplars and mean prompt tokens (the embedded
   1.5B's tokenizer); ``KNNFewShot`` knows no budget: its prompts over it are counted.

    PYTHONPATH=. KDSPY_DATA_DIR=../shared/data python experiments/gsm8k/gsm8k_lm_free.py [--json OUT] [--skip-suite]
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np

from knapsack_dspy.bench.execution.runner import run_suite
from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.bench.suites.suite import load_suite
from knapsack_dspy.docqa.data import load_examples
from knapsack_dspy.docqa.pipelines.pool_attributes import solution_kind
from knapsack_dspy.docqa.tasks import build_pipeline
from knapsack_dspy.docqa.tasks.gsm8k import operation_kind
from knapsack_dspy.embeddings import TextEmbedder
from knapsack_dspy.modules.select_exemplars import query_text
from knapsack_dspy.selection.attribute_classifier import AttributeClassifier, derive_kinds, kind_count

SUITE = Path(__file__).resolve().parents[2] / "benchmarks" / "gsm8k_selection.toml"
SEED = 39
HELD_OUT = 0.2
CLASSIFIER_C = 16.0  # case_coverage's default C


def _agreement(derived, labels) -> dict:
    from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score  # heavy import, figures only

    return {"ari": round(float(adjusted_rand_score(labels, derived)), 3),
            "nmi": round(float(normalized_mutual_info_score(labels, derived)), 3), "classes": len(set(labels))}


def derivation_figures(questions: list[str], outputs: list[str], embedder, references: dict) -> dict:
    """Kinds derived on the whole pool (what a compile derives), and the held-out classifier figure."""
    q_vectors = np.asarray(embedder.encode(questions))
    o_vectors = np.asarray(embedder.encode(outputs))
    whole = derive_kinds(o_vectors, seed=0)
    sizes = list(whole.sizes().values())
    out = {"pool": len(questions), "kinds": whole.k, "rule_k": kind_count(len(questions)),
           "exemplars_per_kind": {"min": min(sizes), "median": float(np.median(sizes)), "max": max(sizes),
                                  "sizes": sizes},
           "agreement": {name: _agreement(list(whole.labels), labels) for name, labels in references.items()}}
    rng = np.random.default_rng(SEED)
    order = rng.permutation(len(questions))
    cut = round(len(order) * (1 - HELD_OUT))
    fit, held = order[:cut], order[cut:]
    part = derive_kinds(o_vectors[fit], seed=0)
    truth = part.assign(o_vectors[held])
    classifier = AttributeClassifier(C=CLASSIFIER_C).fit(q_vectors[fit], list(part.labels))
    predicted = list(classifier.predict(q_vectors[held]))
    majority_label, majority_count = collections.Counter(part.labels).most_common(1)[0]
    out["held_out"] = {"fit_on": len(fit), "held_out": len(held), "kinds": part.k,
                       "classifier_accuracy": round(float(np.mean([p == t for p, t in zip(predicted, truth,
                                                                                           strict=True)])), 3),
                       "majority_class_accuracy": round(float(np.mean([t == majority_label for t in truth])), 3),
                       "majority_class_share_fit": round(majority_count / len(fit), 3)}
    return out


def gsm8k_figures(embedder) -> dict:
    pool = load_examples("gsm8k", "pool")
    student = build_pipeline("gsm8k", "cot", embedder=embedder, token_counter=object())
    name = student.named_predictors()[0][0]
    demos = [student.demo_for(name, ex) for ex in pool]
    outputs = [query_text(dict(d), ["reasoning", "answer"]) for d in demos]
    return derivation_figures([ex.question for ex in pool], outputs, embedder,
                              {"operation_kind": [operation_kind(ex) for ex in pool]})


def tatqa_figures(embedder) -> dict:
    pool = load_examples("tatqa", "dev_pool")
    outputs = [query_text({"reasoning": ex.derivation, "answer": ex.answer}, ["reasoning", "answer"])
               for ex in pool]
    return derivation_figures([ex.question for ex in pool], outputs, embedder,
                              {"solution_kind": [solution_kind(ex) or "none" for ex in pool],
                               "answer_type": [ex.answer_type or "none" for ex in pool]})


def selection_figures(results: Path) -> list[dict]:
    runs: dict[tuple, list] = collections.defaultdict(list)
    for row in load_rows(results):
        runs[(row.spec["budget"], row.spec["max_exemplars"], row.spec["selector"])].append(row)
    table = []
    for (budget, m, selector), rows in sorted(runs.items()):
        measured = [r for r in rows if r["prompt_tokens"] is not None]
        table.append({"budget": budget, "M": m, "selector": selector, "prompts": len(rows),
                      "within_budget": sum(bool(r["within_budget"]) for r in measured),
                      "mean_exemplars": round(float(np.mean([len(r["exemplar_ids"]) for r in measured])), 2),
                      "mean_prompt_tokens": round(float(np.mean([r["prompt_tokens"] for r in measured])), 1),
                      "max_prompt_tokens": int(max(r["prompt_tokens"] for r in measured)),
                      "errors": sum(bool(r.get("error")) for r in rows)})
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--skip-suite", action="store_true", help="report the suite's results without running it")
    args = parser.parse_args(argv)
    embedder = TextEmbedder()
    figures = {"gsm8k": gsm8k_figures(embedder), "tatqa": tatqa_figures(embedder)}
    for name in ("gsm8k", "tatqa"):
        f = figures[name]
        h = f["held_out"]
        per_kind = f["exemplars_per_kind"]
        agreement = ", ".join(f"{k}: ARI {v['ari']}, NMI {v['nmi']} ({v['classes']} classes)"
                              for k, v in f["agreement"].items())
        print(f"{name}: {f['pool']} pool demos -> {f['kinds']} kinds, exemplars per kind {per_kind['min']}-"
              f"{per_kind['max']} (median {per_kind['median']:g}); held out {h['held_out']}: classifier "
              f"{h['classifier_accuracy']:.3f} vs majority {h['majority_class_accuracy']:.3f}; agreement {agreement}")
    suite = load_suite(SUITE)
    results = Path(suite.output)
    if not args.skip_suite:
        run_suite(suite, results, embedder=embedder, progress=False, log=lambda msg: None)
    figures["selection"] = selection_figures(results)
    print(f"\n{'budget':>6} {'M':>2} {'selector':<14} {'within':>9} {'exemplars':>9} {'tokens':>7} {'max':>5}")
    for r in figures["selection"]:
        print(f"{r['budget']:>6} {r['M']:>2} {r['selector']:<14} {r['within_budget']:>4}/{r['prompts']:<4} "
              f"{r['mean_exemplars']:>9.2f} {r['mean_prompt_tokens']:>7.1f} {r['max_prompt_tokens']:>5}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
