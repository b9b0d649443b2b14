"""What changed between two selection-only results directories, by objective: for every row whose exemplar ids
differ, the knapsack objective of the new set minus the old one's, from the instances the selection solved.

    python benchmarks/knapsack_instances.py SUITE instances.pkl        # the instances, recorded with the new code
    python experiments/exact_selection/selection_changes.py OLD_DIR NEW_DIR instances.pkl

An instance is matched to a row by its selector, its query (the question's text) and M, and must hold both sets
among its candidates. Differences of 0 are ties (the same objective to the last bit); positive ones, sets the new
code found better. Selectors without a recorded knapsack (KATE, random, ...) are counted apart.
"""

from __future__ import annotations

import argparse
import pickle
from collections import defaultdict

import numpy as np

from knapsack_dspy.bench.results.store import load_rows
from knapsack_dspy.docqa.data.loader import load_examples


def objective(inst: dict, ids) -> float:
    values = np.asarray(inst["values"], float)
    position = [inst["ids"].index(x) for x in ids]
    kinds = inst.get("kinds")
    covered = {int(kinds[p]) for p in position if kinds is not None and kinds[p] >= 0}
    return float(values[position].sum() + sum(inst["kind_values"][k] for k in covered))


def changes(old_dir, new_dir, instances: list[dict]) -> tuple[list[float], int, int]:
    """(new - old objective of each matched differing row, rows without a matching instance, differing rows)."""
    old = {(r.run, r.example_id): r for r in load_rows(old_dir)}
    new = {(r.run, r.example_id): r for r in load_rows(new_dir)}
    differing = [(old[k], new[k]) for k in old.keys() & new.keys() if old[k].exemplar_ids != new[k].exemplar_ids]
    by_selector = defaultdict(list)
    for inst in instances:
        by_selector[inst["caller"]].append(inst)
    questions: dict = {}
    gaps, unmatched = [], 0
    for a, b in differing:
        split = (a.spec["dataset"], a.spec["eval_split"])
        if split not in questions:
            questions[split] = {str(e.id): e.question for e in load_examples(*split)}
        text = questions[split].get(str(a.example_id), "")
        wanted = set(a.exemplar_ids) | set(b.exemplar_ids)
        found = [i for i in by_selector.get(a.spec["selector"], []) if i["max_items"] == a.spec["max_exemplars"]
                 and text and text in (i["query"] or "") and wanted <= set(i["ids"] or ())]
        if not found:
            unmatched += 1
            continue
        gaps.append(min((objective(i, b.exemplar_ids) - objective(i, a.exemplar_ids) for i in found), key=abs))
    return gaps, unmatched, len(differing)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("instances", help="a .pkl written by benchmarks/knapsack_instances.py")
    args = parser.parse_args(argv)
    with open(args.instances, "rb") as fh:
        instances = pickle.load(fh)
    gaps, unmatched, total = changes(args.old, args.new, instances)
    print(f"{total} rows with other exemplar ids; {len(gaps)} matched to a recorded knapsack, {unmatched} not")
    if gaps:
        g = np.asarray(gaps)
        print(f"new - old objective: min {g.min():.3g}, max {g.max():.3g}; exactly equal {int((g == 0).sum())}, "
              f"new better {int((g > 0).sum())} {sorted(g[g > 0].tolist())[:5]}, new worse {int((g < 0).sum())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
