#!/usr/bin/env bash
# Issue 25: "on the real suites (small pools) selections identical to today's". Runs a suite selection-only at two
# commits, each exported (git archive) and run from its own directory, one after the other on the same machine
# with the same caches (the embedding cache: the same vectors), and compares the rows (benchmarks/compare_results.py;
# the fields newer code adds are ignored). Both runs should see a quiet machine: rows mark a knapsack whose time
# limit ended its search (selection_status), which on a loaded machine can differ from run to run.
#   experiments/pool_scale_diagnostics/selection_identity.sh OLD NEW SUITE.toml LIMIT
# Run from the repository's root with KDSPY_DATA_DIR set.
set -euo pipefail
old=$1 new=$2 suite=$(realpath "$3") limit=$4 root=$(pwd) py=${PYTHON:-$(pwd)/.venv/bin/python}
work=$(mktemp -d)
echo "work folder (exports, rows, logs): $work"
for c in "$old" "$new"; do
  mkdir -p "$work/code_$c"
  git archive "$c" | tar -x -C "$work/code_$c"
  (cd "$work/code_$c" && PYTHONPATH="$work/code_$c" "$py" -m knapsack_dspy.cli.main bench "$suite" --limit "$limit" \
     --out "$work/rows_$c" --quiet > "$work/$c.log" 2>&1)
done
"$py" "$root/benchmarks/compare_results.py" "$work/rows_$new" "$work/rows_$old" --ignore exemplar_tokens \
  --ignore token_count --ignore mean_exemplar_tokens --ignore token_count_estimated --ignore time_limited
