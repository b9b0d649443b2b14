"""Evidence recall of the retrievers, plus SARA citation extraction and statute lengths.

    python benchmarks/retrieval_recall.py                       # TAT-QA dev_tune + FinQA fixture + SARA train
    python benchmarks/retrieval_recall.py --split dev --out recall.json

For every question with gold text evidence, paragraphs are ranked three ways and recall@n is the share
of gold paragraphs among the first n (n = 1, 2, 3, 5, all), averaged over questions:

* ``dense``: ``HybridRetriever.rank_paragraphs`` (sentence-transformers cosine, all-MiniLM-L6-v2);
* ``bm25``: Okapi BM25 over the paragraphs of the same report (``knapsack_dspy.docqa.retrieval.bm25``);
* ``lead``: document order (the first n paragraphs), the no-retrieval baseline.

Gold: TAT-QA ``rel_paragraphs`` (``gold_evidence`` "text_<i>"); FinQA ``gold_inds`` "text_<i>" for paragraphs
and "table_<i>" for rows (rows ranked the same three ways, header rows always kept). FinQA documents are not
in the data directory, so FinQA runs on hand-written fixtures in the official schema (``--finqa``): a smoke
test of the pipeline, not a measurement. SARA: share of questions with a citation, and statute length per
strategy in tokens estimated as characters / 4.

Prints a Markdown table and writes JSON (``--out``, default ``benchmarks/results/retrieval_recall.json``).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import knapsack_dspy  # noqa: F401  (offline defaults before dspy / litellm / HF imports)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FINQA = REPO / "tests" / "fixtures" / "retrieval_finqa_gold_inds.json"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "retrieval_recall.json"
CUTS: list[int | None] = [1, 2, 3, 5, None]
METHODS = ("dense", "bm25", "lead")


def _cut_name(n: int | None) -> str:
    return "all" if n is None else str(n)


def _rankers(retriever):
    from knapsack_dspy.docqa.retrieval.bm25 import BM25
    from knapsack_dspy.docqa.retrieval.ranking import rank_indices
    from knapsack_dspy.docqa.retrieval.table_rows import row_text
    from knapsack_dspy.docqa.table_layout import header_row_count

    bm25 = BM25()

    def paragraphs(method, question, docs):
        if method == "dense":
            return retriever.rank_paragraphs(question, docs)
        if method == "bm25":
            return rank_indices(bm25.scores(question, docs))
        return list(range(len(docs)))

    def rows(method, question, table):
        n_header = header_row_count(table)
        if method == "dense":
            return retriever.rank_rows(question, table)
        if method == "bm25":
            data = [row_text(r) for r in table[n_header:]]
            return [n_header + i for i in rank_indices(bm25.scores(question, data))]
        return list(range(n_header, len(table)))

    return paragraphs, rows


def evaluate_recall(examples, retriever, with_rows: bool) -> dict:
    """Mean recall@n per method over examples with gold text (and, if ``with_rows``, gold row) evidence."""
    from knapsack_dspy.docqa.retrieval.evidence_recall import gold_indices, recall_at_n
    from knapsack_dspy.docqa.table_layout import header_row_count

    rank_paragraphs, rank_rows = _rankers(retriever)
    sums = {kind: {m: {_cut_name(n): 0.0 for n in CUTS} for m in METHODS} for kind in ("text", "rows")}
    counts = {"text": 0, "rows": 0}
    kept_chars = {_cut_name(n): 0 for n in CUTS}
    n_paragraphs = []
    for example in examples:
        paragraphs = list(example.paragraphs)
        gold_text = {i for i in gold_indices(example.gold_evidence, "text") if i < len(paragraphs)}
        if gold_text:
            counts["text"] += 1
            n_paragraphs.append(len(paragraphs))
            for method in METHODS:
                ranking = rank_paragraphs(method, example.question, paragraphs)
                for n in CUTS:
                    sums["text"][method][_cut_name(n)] += recall_at_n(ranking, gold_text, n)
                if method == "dense":
                    for n in CUTS:
                        kept = ranking if n is None else ranking[:n]
                        kept_chars[_cut_name(n)] += sum(len(paragraphs[i]) for i in kept)
        table = [list(map(str, row)) for row in example.table]
        gold_rows = {i for i in gold_indices(example.gold_evidence, "table") if i < len(table)}
        if with_rows and gold_rows:
            counts["rows"] += 1
            header = range(header_row_count(table))
            for method in METHODS:
                ranking = rank_rows(method, example.question, table)
                for n in CUTS:
                    sums["rows"][method][_cut_name(n)] += recall_at_n(ranking, gold_rows, n, always_kept=header)
    result = {
        "questions": len(examples),
        "questions_with_gold_text": counts["text"],
        "mean_paragraphs_per_question": round(sum(n_paragraphs) / max(len(n_paragraphs), 1), 2),
        "text_recall": {m: {k: round(v / max(counts["text"], 1), 4) for k, v in sums["text"][m].items()}
                        for m in METHODS},
        "dense_kept_text_tokens_chars_div_4": {k: round(v / 4 / max(counts["text"], 1), 1)
                                               for k, v in kept_chars.items()},
    }
    if with_rows:
        result["questions_with_gold_rows"] = counts["rows"]
        result["row_recall"] = {m: {k: round(v / max(counts["rows"], 1), 4) for k, v in sums["rows"][m].items()}
                                for m in METHODS}
    return result


def evaluate_sara(examples, corpus) -> dict:
    from knapsack_dspy.docqa.pipelines.statute_retriever import StatuteRetriever
    from knapsack_dspy.docqa.retrieval.statute_strategies import STRATEGIES

    by_type: dict[str, list[int]] = {}
    tokens = {strategy: [] for strategy in STRATEGIES}
    partial = 0
    retrievers = {s: StatuteRetriever(strategy=s, statutes=corpus) for s in STRATEGIES}
    for example in examples:
        kind = str(example.get("answer_type") or "all")
        preds = {s: r(question=example.question) for s, r in retrievers.items()}
        cited = preds["mentioned_only"].has_citation
        by_type.setdefault(kind, []).append(int(cited))
        partial += int(bool(preds["mentioned_only"].partial))
        if cited:
            for strategy, pred in preds.items():
                tokens[strategy].append(len(pred.statute_text) / 4)
    everything = StatuteRetriever(statutes=corpus, no_citation="all")(question="no citation").statute_text
    all_cited = [x for values in by_type.values() for x in values]
    return {
        "questions": len(all_cited),
        "citation_rate": round(sum(all_cited) / max(len(all_cited), 1), 4),
        "citation_rate_by_type": {k: {"questions": len(v), "rate": round(sum(v) / len(v), 4)}
                                  for k, v in sorted(by_type.items())},
        "citations_served_by_ancestor": partial,
        "mean_statute_tokens_chars_div_4": {s: round(sum(v) / max(len(v), 1), 1) for s, v in tokens.items()},
        "max_statute_tokens_chars_div_4": {s: round(max(v, default=0), 1) for s, v in tokens.items()},
        "all_statutes_tokens_chars_div_4": round(len(everything) / 4, 1),
    }


def _table(title: str, recall: dict) -> str:
    lines = [f"**{title}**", "", "| method | " + " | ".join(f"R@{_cut_name(n)}" for n in CUTS) + " |",
             "|---|" + "---:|" * len(CUTS)]
    for method, values in recall.items():
        lines.append(f"| {method} | " + " | ".join(f"{values[_cut_name(n)]:.3f}" for n in CUTS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=None, help="data directory (default: $KDSPY_DATA_DIR)")
    parser.add_argument("--split", default="dev_tune", help="TAT-QA split (default: dev_tune)")
    parser.add_argument("--finqa", default=str(DEFAULT_FINQA), help="FinQA JSON in the official schema ('' to skip)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N TAT-QA questions")
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="JSON output path")
    args = parser.parse_args(argv)

    from knapsack_dspy.docqa.data import load_examples
    from knapsack_dspy.docqa.pipelines.hybrid_retriever import HybridRetriever
    from knapsack_dspy.docqa.pipelines.statute_retriever import load_statute_corpus
    from knapsack_dspy.embeddings import TextEmbedder

    started = time.perf_counter()
    embedder = TextEmbedder()
    retriever = HybridRetriever(embedder=embedder)
    report: dict = {
        "command": "python benchmarks/retrieval_recall.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "embedder": embedder.model_id,
        "python": platform.python_version(),
    }
    tatqa = load_examples("tatqa", split=args.split, data_dir=args.data_dir, limit=args.limit)
    report["tatqa"] = {"split": args.split, **evaluate_recall(tatqa, retriever, with_rows=False)}
    print(_table(f"TAT-QA {args.split}: recall of gold paragraphs "
                 f"({report['tatqa']['questions_with_gold_text']} of {len(tatqa)} questions have text evidence, "
                 f"{report['tatqa']['mean_paragraphs_per_question']} paragraphs per report)",
                 report["tatqa"]["text_recall"]))
    print()
    if args.finqa:
        finqa = load_examples("finqa", path=args.finqa)
        report["finqa_fixture"] = {"path": str(Path(args.finqa).resolve().relative_to(REPO))
                                   if Path(args.finqa).resolve().is_relative_to(REPO) else args.finqa,
                                   **evaluate_recall(finqa, retriever, with_rows=True)}
        print(_table(f"FinQA fixture ({len(finqa)} questions; smoke test): gold sentences",
                     report["finqa_fixture"]["text_recall"]))
        print()
        print(_table("FinQA fixture: gold table rows", report["finqa_fixture"]["row_recall"]))
        print()
    sara = load_examples("sara", split="train", data_dir=args.data_dir)
    report["sara"] = evaluate_sara(sara, load_statute_corpus(args.data_dir))
    s = report["sara"]
    by_type = ", ".join(f"{kind}: {v['rate']:.0%} of {v['questions']}"
                        for kind, v in s["citation_rate_by_type"].items())
    print(f"**SARA train**: {s['questions']} questions, citation extracted for {s['citation_rate']:.1%} "
          f"({by_type})")
    print("mean statute tokens (chars/4) per cited question: "
          + ", ".join(f"{k} {v}" for k, v in s["mean_statute_tokens_chars_div_4"].items())
          + f"; all statutes: {s['all_statutes_tokens_chars_div_4']}")
    report["seconds"] = round(time.perf_counter() - started, 1)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {out} ({report['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
