"""``python -m knapsack_dspy.docqa.data``: load every split in the data directory and print counts and timings.

    python -m knapsack_dspy.docqa.data [--data-dir DIR] [--repeat N]

Times are the best of N loads in this process (dspy is imported first and its import time reported
separately: the first load of a process pays it).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections import Counter

from knapsack_dspy.docqa.data import DataError, load_examples, load_statutes
from knapsack_dspy.paths import ConfigError, data_dir

SPLITS = (("tatqa", "dev"), ("tatqa", "dev_pool"), ("tatqa", "dev_tune"), ("finqa_cases", "train"),
          ("finqa_cases", "dev"), ("sara", "train"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m knapsack_dspy.docqa.data", description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None, help="data directory (default: $KDSPY_DATA_DIR)")
    parser.add_argument("--repeat", type=int, default=5, help="loads per split; the best time is shown")
    args = parser.parse_args(argv)

    try:
        data_dir(args.data_dir)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    started = time.perf_counter()
    importlib.import_module("dspy")  # what the first load would import
    print(f"import dspy (paid once, by the first load): {time.perf_counter() - started:.2f} s")
    print(f"{'dataset':12} {'split':9} {'examples':>8} {'best ms':>8}  modality / answer_type")
    for dataset, split in SPLITS:
        try:
            best, examples = float("inf"), []
            for _ in range(max(args.repeat, 1)):
                examples = load_examples(dataset, split=split, data_dir=args.data_dir)
                best = min(best, examples.report.seconds)
        except DataError as exc:
            print(f"{dataset:12} {split:9} error: {exc}")
            continue
        modality = dict(Counter(ex.modality for ex in examples).most_common())
        answer_type = dict(Counter(ex.answer_type for ex in examples).most_common())
        print(f"{dataset:12} {split:9} {len(examples):8d} {best * 1000:8.1f}  {modality} / {answer_type}")
    try:
        started = time.perf_counter()
        statutes = load_statutes(data_dir=args.data_dir)
        print(f"statutes: {len(statutes)} sections ({', '.join(statutes)}) in "
              f"{(time.perf_counter() - started) * 1000:.1f} ms")
    except DataError as exc:
        print(f"statutes: error: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
