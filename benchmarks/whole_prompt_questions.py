"""The questions of issue 49's pre-registered LM run (docs/results.md, "Pre-registered: whole-prompt selection"):
questions no committed run has answered with a language model, excluded by id. No LM.

    python benchmarks/whole_prompt_questions.py                  # the counts and the hashes
    python benchmarks/whole_prompt_questions.py --toml tatqa     # the ids as the suite's example_ids array

- **TAT-QA** (the gate): every ``dev_pool_fold1`` question not answered, in the split's order;
- **FinQA** (reported): the first 100 ``dev_docs_tune`` questions not answered, in the split's order.

**Answered with a language model**: the ``example_id`` of any row of a results directory -- a ``predictions.jsonl``
(or the committed ``.xz`` / ``.gz``) anywhere under ``benchmarks/results/`` or under a ``results`` folder of
``experiments/`` -- whose run is not selection only (``spec.selection_only`` false: the LM was asked, whether or not
it replied), and the ids of the other LM rows committed in another shape (:data:`OTHER_LM_ROWS`). Selection-only rows
(prompts and tokens, no LM) do not count. The pre-registered run's own results directories (:data:`OWN_OUTPUTS`) are
not read, so the lists stay what they were at the freeze once its rows are committed.

**The hash** of a list: the sha256 (hex) of its ids sorted (Python's string order) and joined by ``"\\n"`` (no final
newline), UTF-8: ``hashlib.sha256("\\n".join(sorted(ids)).encode()).hexdigest()`` (:func:`ids_sha256`).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from knapsack_dspy.bench.results.store import COMPRESSED_ROWS_FILES, ROWS_FILE, load_rows

ROOT = Path(__file__).resolve().parents[1]
#: The results directories read (relative to the checkout): every results directory below them
RESULTS_ROOTS = ("benchmarks/results", "experiments")
#: The pre-registered run's own results directories (its suites' ``output``): never read
OWN_OUTPUTS = ("benchmarks/results/whole_prompt_tatqa_1p5b", "benchmarks/results/whole_prompt_finqa_1p5b")
#: LM rows committed in another shape than a results row: file -> the key of a line's question id
OTHER_LM_ROWS = {"experiments/answer_quality/results/design_program_style/rows.jsonl": "id"}
#: name -> (dataset, eval split, how many: None = all)
QUESTIONS = {"tatqa": ("tatqa", "dev_pool_fold1", None), "finqa": ("finqa", "dev_docs_tune", 100)}


def results_directories(root: Path = ROOT) -> list[Path]:
    """Every results directory (one holding ``predictions.jsonl``, ``.xz`` or ``.gz``) under :data:`RESULTS_ROOTS`
    (under ``experiments/`` only inside a ``results`` folder), but :data:`OWN_OUTPUTS`; sorted."""
    own = {(root / p).resolve() for p in OWN_OUTPUTS}
    found = set()
    for top in RESULTS_ROOTS:
        for name in (ROWS_FILE, *COMPRESSED_ROWS_FILES):
            for path in (root / top).rglob(name):
                directory = path.parent
                relative = directory.relative_to(root).parts
                if top == "experiments" and "results" not in relative:
                    continue
                if directory.resolve() not in own:
                    found.add(directory)
    return sorted(found)


def answered_ids(root: Path = ROOT) -> set[str]:
    """The ids of every question a committed run has answered with a language model (see the module docstring)."""
    ids: set[str] = set()
    for directory in results_directories(root):
        ids |= {str(row.example_id) for row in load_rows(directory) if not row.spec.get("selection_only")}
    for name, key in OTHER_LM_ROWS.items():
        path = root / name
        if path.is_file():
            with (gzip.open(path, "rt") if path.suffix == ".gz" else open(path)) as lines:
                ids |= {str(json.loads(line)[key]) for line in lines if line.strip()}
    return ids


def unanswered(split_ids: Iterable[str], answered: set[str], count: int | None = None) -> list[str]:
    """The ids of ``split_ids`` not in ``answered``, in their order, the first ``count`` (None: all)."""
    kept = [i for i in split_ids if i not in answered]
    return kept if count is None else kept[:count]


def ids_sha256(ids: Sequence[str]) -> str:
    """The sha256 of the ids sorted and joined by newlines (the pre-registration's hash)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode()).hexdigest()


def questions(root: Path = ROOT, answered: set[str] | None = None) -> dict[str, dict]:
    """name -> {dataset, split, ids, documents, split_questions, excluded}: the pre-registered questions."""
    from knapsack_dspy.docqa.data import load_examples

    answered = answered_ids(root) if answered is None else answered
    out = {}
    for name, (dataset, split, count) in QUESTIONS.items():
        examples = list(load_examples(dataset, split=split))
        split_ids = [str(e["id"]) for e in examples]
        ids = unanswered(split_ids, answered, count)
        doc_of = {str(e["id"]): str(e.get("doc_id")) for e in examples}
        out[name] = {"dataset": dataset, "split": split, "ids": ids, "documents": len({doc_of[i] for i in ids}),
                     "split_questions": len(split_ids), "excluded": sum(i in answered for i in split_ids)}
    return out


def toml_array(ids: Sequence[str], indent: str = "    ") -> str:
    """``example_ids = [...]``, one id a line."""
    return "example_ids = [\n" + "".join(f'{indent}"{i}",\n' for i in ids) + "]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--toml", choices=sorted(QUESTIONS), help="print that list as a suite's example_ids")
    args = parser.parse_args(argv)
    found = questions()
    if args.toml:
        print(toml_array(found[args.toml]["ids"]))
        return 0
    for name, q in found.items():
        print(f"{name}: {q['split']} ({q['split_questions']} questions, {q['excluded']} answered by a committed LM "
              f"run): {len(q['ids'])} questions on {q['documents']} documents, sha256 {ids_sha256(q['ids'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
