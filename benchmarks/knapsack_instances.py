"""Record the knapsack instances a suite's selections solve, to time and check solvers on real inputs.

Runs the suite selection-only into a scratch directory with ``solve_knapsack`` wrapped in the selector modules
that call it, and pickles every call's arguments (values, costs, capacity, M, constraints, groups, kinds), tagged
with the selector, the query (its text) and the candidates' pool ids, for ``benchmarks/exact_selection.py``:

    python benchmarks/knapsack_instances.py benchmarks/selection_objective_selection.toml OUT.pkl [--limit N]
"""

from __future__ import annotations

import argparse
import pickle
import tempfile

import knapsack_dspy  # noqa: F401  (environment defaults first)
from knapsack_dspy.bench.execution import runner
from knapsack_dspy.bench.suites.suite import load_suite
from knapsack_dspy.selection import knapsack
from knapsack_dspy.selection.selectors import case_coverage, csp, seer, static_knapsack

CALLERS = (case_coverage, seer, csp, static_knapsack)


def record(suite_path: str, limit: int | None = None) -> list[dict]:
    """Every ``solve_knapsack`` call of the suite's selection, in call order (one worker thread)."""
    instances: list[dict] = []
    original = knapsack.solve_knapsack

    def recording(values, costs, capacity, max_items, constraints=(), time_limit=5.0, **kw):
        instances.append({**caller(), "values": values, "costs": costs, "capacity": capacity,
                          "max_items": max_items, "constraints": list(constraints), **kw})
        return original(values, costs, capacity, max_items, constraints, **kw)

    patched = [m for m in CALLERS if hasattr(m, "solve_knapsack")]
    for module in patched:
        module.solve_knapsack = recording
    try:
        suite = load_suite(suite_path)
        with tempfile.TemporaryDirectory() as out:
            runner.run_suite(suite, out, limit=limit, selection_only=True, workers=1, progress=True)
    finally:
        for module in patched:
            module.solve_knapsack = original
    return instances


def caller() -> dict:
    """Which selector asked (``caller``), for which query (``query``: the request's key, its text) and over which
    pool exemplars (``ids``: the instance's items), read from the calling frames."""
    import inspect  # only here: who asked

    for frame in inspect.stack()[2:8]:
        local = frame.frame.f_locals
        owner = local.get("self")
        if owner is not None and hasattr(owner, "name") and "request" in local:
            pool, idx = local.get("pool"), local.get("idx")
            ids = [pool.ids[int(i)] for i in idx] if pool is not None and idx is not None else None
            return {"caller": str(owner.name), "query": local["request"].key, "ids": ids}
    return {"caller": "?", "query": None, "ids": None}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("suite")
    parser.add_argument("out", help="a .pkl file")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    instances = record(args.suite, args.limit)
    with open(args.out, "wb") as fh:
        pickle.dump(instances, fh)
    print(f"{len(instances)} instances -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
