#!/usr/bin/env bash
# Commit a long run's rows as they grow, so that a session or a machine that ends loses at most one interval:
# every MINUTES (default 30) while process PID lives, and once more after it ends, gzip the complete lines of
# OUT_DIR/predictions.jsonl into OUT_DIR/predictions.jsonl.gz and commit that one file (`git commit --only`: what
# else the index holds stays staged, not committed). report.md and the plots are left to the person committing a
# complete round (they are rebuilt when a round starts).
#
#   benchmarks/commit_rows.sh OUT_DIR PID [MINUTES]
#   e.g. benchmarks/run_pinned.sh 1a2b3c4 benchmarks/results/x_1p5b 20 benchmarks/x.toml:200 & \
#        benchmarks/commit_rows.sh benchmarks/results/x_1p5b $! 30 &
set -euo pipefail
out=$(realpath -m "${1:?OUT_DIR}"); pid=${2:?PID}; minutes=${3:-30}
rows=$out/predictions.jsonl; packed=$out/predictions.jsonl.gz
cd "$out"

commit_complete_rows() {
  [ -f "$rows" ] || return 0
  local n; n=$(wc -l < "$rows")              # complete lines only: a row being written has no newline yet
  head -n "$n" "$rows" | gzip -n -c > "$packed.tmp" && mv "$packed.tmp" "$packed"
  if git ls-files --error-unmatch "$packed" >/dev/null 2>&1; then
    git diff --quiet -- "$packed" && return 0  # nothing new since the last commit
  else
    git add -- "$packed"                       # a new run's first commit
  fi
  for _ in 1 2 3 4 5 6; do                     # another git command may hold the index lock for a moment
    if git commit -q --only -m "$(basename "$out"): $n rows of its run" -- "$packed"; then
      echo "commit_rows: $n rows committed ($(date -u +%H:%M:%S))"; return 0
    fi
    sleep 10
  done
  echo "commit_rows: could not commit $n rows" >&2
}

while kill -0 "$pid" 2>/dev/null; do
  waited=0
  while [ "$waited" -lt $((minutes * 60)) ] && kill -0 "$pid" 2>/dev/null; do sleep 15; waited=$((waited + 15)); done
  commit_complete_rows                         # the last pass runs after the run has ended
done
