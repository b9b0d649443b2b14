"""How long ``kdspy compile`` takes, and where: warm (every cache filled) and cold (an empty project cache).

Runs ``kdspy compile --dataset tatqa --pipeline pot --selector seer --budget 2048 -M 4`` (``--args`` to change
it) in fresh processes under cProfile and ``-X importtime`` and reports the wall time and its parts: imports,
loading the data, rendering the pool's demos, measuring their token costs, embedding, fitting the attribute
classifiers, selecting for the validation questions (the configuration's proxies), writing the program. Warm
runs reuse the project cache (``$KDSPY_CACHE_DIR`` or ``~/.cache/knapsack-dspy``); ``--cold`` runs with a new,
empty cache folder (the embedder, the token-counting model and every cache start from nothing), once.

    python experiments/throughput/compile_time.py [--runs 3] [--cold] [--json out.json]

Timings depend on the machine's load (printed): measure on an idle machine for docs/results.md.
"""

from __future__ import annotations

import argparse
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from knapsack_dspy.testing.json_result import print_and_save

ROOT = Path(__file__).resolve().parents[2]
COMPILE = ["compile", "--dataset", "tatqa", "--pipeline", "pot", "--selector", "seer", "--budget", "2048", "-M", "4",
           "--quiet"]
#: part -> (file suffix, function name): the cumulative time of the outermost such call
PARTS = {
    "load data": ("knapsack_dspy/docqa/data/loader.py", "load_examples"),
    "render demos": ("knapsack_dspy/docqa/pipelines/pipeline.py", "render_demo"),
    "token costs": ("knapsack_dspy/modules/prompt_cost.py", "demo_costs"),
    "embed": ("knapsack_dspy/embeddings.py", "encode"),
    "fit classifiers": ("knapsack_dspy/selection/attribute_classifier.py", "fit"),
    "select for validation questions": ("knapsack_dspy/teleprompt/settings_search.py", "proxy_scores"),
    "write program": ("knapsack_dspy/docqa/pipelines/pipeline.py", "save_program"),
    "whole compile (KnapsackFewShot.compile)": ("knapsack_dspy/teleprompt/knapsack_few_shot.py", "compile"),
}


def _import_seconds(stderr: str) -> float:
    """Total of the top-level imports in ``-X importtime`` output (cumulative microseconds of depth-0 lines)."""
    total = 0
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            _, cumulative, name = line.split("|", 2)
            if cumulative.strip().isdigit() and not name.startswith("  "):
                total += int(cumulative.strip())
    return total / 1e6


def _parts(profile: Path) -> dict:
    stats = pstats.Stats(str(profile)).stats
    out = {}
    for part, (suffix, name) in PARTS.items():
        times = [value[3] for (path, _, function), value in stats.items()
                 if function == name and path.endswith(suffix)]
        out[part] = round(max(times), 2) if times else 0.0
    return out


def run_once(cache_dir: str | None, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix="kdspy-compile-time-") as scratch:
        profile = Path(scratch) / "compile.prof"
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        if cache_dir:
            env["KDSPY_CACHE_DIR"] = cache_dir
        command = [sys.executable, "-X", "importtime", "-m", "cProfile", "-o", str(profile), "-m",
                   "knapsack_dspy.cli.main", *COMPILE, *extra, "-o", str(Path(scratch) / "prog.json")]
        started = time.perf_counter()
        done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise RuntimeError(f"compile failed ({done.returncode}): {done.stderr[-2000:]}")
        return {"wall_s": round(wall, 2), "imports_s": round(_import_seconds(done.stderr), 2), **_parts(profile),
                "load_average": round(os.getloadavg()[0], 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="warm runs (median reported)")
    parser.add_argument("--cold", action="store_true", help="also one run with an empty project cache")
    parser.add_argument("--args", default="", help="extra kdspy compile arguments (space-separated)")
    parser.add_argument("--json", help="write the runs here")
    args = parser.parse_args(argv)
    extra = args.args.split()
    run_once(None, extra)  # fills the caches this code uses (rendered demos are keyed on the code)
    warm = [run_once(None, extra) for _ in range(args.runs)]
    report = {"warm_runs": warm, "warm_median": {k: round(statistics.median(r[k] for r in warm), 2)
                                                 for k in warm[0]}}
    if args.cold:
        folder = tempfile.mkdtemp(prefix="kdspy-cold-cache-")
        try:
            report["cold"] = run_once(folder, extra)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print_and_save(report, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
