#!/usr/bin/env bash
# Run long LM suites from a pinned export of one commit, in rounds of increasing --limit, into a results
# directory of the live checkout (commit its predictions.jsonl as it grows; a re-run resumes).
#
#   benchmarks/run_pinned.sh COMMIT OUT_DIR STEP "SUITE:MAX" ["SUITE:MAX" ...]
#   e.g. benchmarks/run_pinned.sh 1a2b3c4 benchmarks/results/answer_quality_1p5b 20 \
#            benchmarks/answer_quality.toml:200 benchmarks/answer_quality_b1536.toml:100
#
# Each round n = STEP, 2*STEP, ... answers the first n questions of every suite (capped at its MAX), so that
# a partial run compares the selectors on the same questions. The export goes to $PINNED_ROOT/COMMIT
# (default: pinned/ beside this checkout), and bench runs there with each SUITE as given (a path inside the
# checkout, so suite.json records it relative, no path of this machine); the venv is $PYTHON (default: this
# checkout's .venv); the data is $KDSPY_DATA_DIR (default: this checkout's ../shared/data -- the export's own
# default would point next to the export).
# Rows record the commit (git archive stamps knapsack_dspy/_commit.py).
set -euo pipefail
commit=$1; out=$(realpath -m "$2"); step=$3; shift 3
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
export KDSPY_DATA_DIR=${KDSPY_DATA_DIR:-$(cd "$here/.." && pwd)/shared/data}
pinned=${PINNED_ROOT:-$(cd "$here/.." && pwd)/pinned}/$commit
if [ ! -d "$pinned" ]; then
  mkdir -p "$pinned"
  git -C "$here" archive "$commit" | tar -x -C "$pinned"
fi
# rows committed compressed go back to predictions.jsonl first: an export of code older than the .xz form would
# not see them, and would start the run again (store.decompress_rows; nothing is done when the plain file is there)
PYTHONPATH="$here" "$python" -c 'import sys
from knapsack_dspy.bench.results.store import ResultsFileError, decompress_rows
try:
    if decompress_rows(sys.argv[1]): print("== decompressed the committed rows to predictions.jsonl")
except ResultsFileError as exc:
    print(f"run_pinned: {exc}", file=sys.stderr); sys.exit(2)' "$out"
max=0
for spec in "$@"; do m=${spec##*:}; [ "$m" -gt "$max" ] && max=$m; done
for ((n = step; n <= max; n += step)); do
  for spec in "$@"; do
    suite=${spec%:*}; cap=${spec##*:}
    limit=$(( n < cap ? n : cap ))
    [ "$limit" -lt "$n" ] && [ "$((n - step))" -ge "$cap" ] && continue   # this suite finished earlier
    echo "== round $n: $suite --limit $limit ($(date -u +%H:%M:%S))"
    (cd "$pinned" && PYTHONPATH="$pinned" "$python" -m knapsack_dspy.cli.main bench "$suite" \
        --limit "$limit" --out "$out" --quiet)
  done
done
echo "== done ($(date -u +%H:%M:%S))"
