"""The questions a run answers, in the order it answers them: the eval split in its order or the one ``order_seed``
fixes (``data.seeded_order``), then ``example_ids`` (if given), then the first ``limit``. The bench's runner asks
them in this order; scripts that name questions by position ("questions 61-150") count in it too
(``bench.scoring.question_range``). ``load_split`` reads a run's pool or eval examples."""

from __future__ import annotations

from knapsack_dspy.bench.suites.suite import RunSpec, SuiteError
from knapsack_dspy.docqa.data.loader import load_examples
from knapsack_dspy.docqa.data.seeded_order import in_seeded_order

__all__ = ["chosen_examples", "load_split"]


def load_split(spec: RunSpec, which: str, data_dir):
    """The run's ``"pool"`` or ``"eval"`` examples: its file (``pool_path`` / ``eval_path``) or its split."""
    path = spec.pool_path if which == "pool" else spec.eval_path
    split = spec.pool_split if which == "pool" else spec.eval_split
    dataset = (spec.pool_dataset or spec.dataset) if which == "pool" else spec.dataset
    if path:
        return load_examples(dataset, path=path, data_dir=data_dir)
    return load_examples(dataset, split=split, data_dir=data_dir)


def chosen_examples(evalset, spec: RunSpec) -> list:
    """The eval split's questions ``spec`` answers, in its order; ``example_ids`` missing from the split are a
    :class:`SuiteError`."""
    examples = list(evalset) if spec.order_seed is None else in_seeded_order(evalset, spec.order_seed)
    if spec.example_ids:
        wanted = set(spec.example_ids)
        examples = [ex for ex in examples if ex.id in wanted]
        missing = wanted - {ex.id for ex in examples}
        if missing:
            where = spec.eval_path or spec.eval_split
            raise SuiteError(f"{len(missing)} example_ids are not in {spec.dataset} {where}: "
                             f"{', '.join(sorted(missing)[:5])}{' ...' if len(missing) > 5 else ''}")
    return examples[: spec.limit] if spec.limit else examples
