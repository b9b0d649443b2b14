#!/usr/bin/env bash
# Commit a long run's rows as they grow, so that a session or a machine that ends loses at most one interval:
# every MINUTES (a whole number >= 1, default 30) while process PID lives, and once more when it has ended, compress
# the complete lines of OUT_DIR/predictions.jsonl into OUT_DIR/predictions.jsonl.xz (xz: docs/results.md,
# "Compressed rows") and commit that one file, with the removal of a predictions.jsonl.gz it replaces
# (`git commit --only`: what else the index holds stays staged, not committed) on the branch checked out when the
# script started (it skips a pass while another branch, a detached HEAD, a merge or a rebase is checked out).
# report.md and the plots are left to the person committing a complete round (they are rebuilt when a round starts).
#
#   benchmarks/commit_rows.sh OUT_DIR PID [MINUTES]
#   e.g. benchmarks/run_pinned.sh 1a2b3c4 benchmarks/results/x_1p5b 20 benchmarks/x.toml:200 & \
#        benchmarks/commit_rows.sh benchmarks/results/x_1p5b $! 30 &
set -euo pipefail
out=$(realpath -m "${1:?OUT_DIR}"); pid=${2:?PID}; minutes=${3:-30}
[[ "$minutes" =~ ^[1-9][0-9]*$ ]] || { echo "commit_rows: MINUTES must be a whole number >= 1, not '$minutes'" >&2; exit 2; }
rows=$out/predictions.jsonl; packed=$out/predictions.jsonl.xz; older=$out/predictions.jsonl.gz
command -v xz >/dev/null || { echo "commit_rows: xz is not installed (apt-get install xz-utils)" >&2; exit 2; }
cd "$(dirname "$0")/.."
branch=$(git symbolic-ref -q HEAD) || { echo "commit_rows: no branch is checked out" >&2; exit 2; }
git_dir=$(git rev-parse --git-dir)

commit_complete_rows() {
  [ -f "$rows" ] || return 0
  if [ "$(git symbolic-ref -q HEAD || true)" != "$branch" ] || [ -e "$git_dir/MERGE_HEAD" ] \
      || [ -d "$git_dir/rebase-merge" ] || [ -d "$git_dir/rebase-apply" ]; then
    echo "commit_rows: $branch is not checked out alone now; no commit this pass ($(date -u +%H:%M:%S))" >&2
    return 0
  fi
  local n tmp; n=$(wc -l < "$rows")          # complete lines only: a row being written has no newline yet
  tmp=$(mktemp)                              # outside the checkout: no stray file for a `git add -A`
  if ! { head -n "$n" "$rows" | xz -6 -T1 -c > "$tmp" && chmod 644 "$tmp" && mv "$tmp" "$packed"; }; then
    rm -f -- "$tmp"; echo "commit_rows: could not compress $n rows ($(date -u +%H:%M:%S))" >&2; return 0
  fi
  local paths=("$packed") older_rel
  older_rel=$(realpath --relative-to=. "$older")
  if git cat-file -e "HEAD:$older_rel" 2>/dev/null; then
    rm -f -- "$older"; paths+=("$older")     # the .gz of rows committed before xz goes in the same commit
  fi
  if [ "${#paths[@]}" -eq 1 ] && git cat-file -e "HEAD:$(realpath --relative-to=. "$packed")" 2>/dev/null \
      && git diff --quiet HEAD -- "$packed"; then
    return 0                                 # nothing new since the last commit
  fi
  for _ in 1 2 3 4 5 6; do                   # another git command may hold the index lock for a moment
    if git add -- "$packed" && git commit -q --only -m "$(basename "$out"): $n rows of its run" \
        -- "${paths[@]}"; then
      echo "commit_rows: $n rows committed ($(date -u +%H:%M:%S))"; return 0
    fi
    sleep 10
  done
  echo "commit_rows: could not commit $n rows ($(date -u +%H:%M:%S))" >&2
}

while kill -0 "$pid" 2>/dev/null; do
  waited=0
  while [ "$waited" -lt $((minutes * 60)) ] && kill -0 "$pid" 2>/dev/null; do sleep 15; waited=$((waited + 15)); done
  kill -0 "$pid" 2>/dev/null && commit_complete_rows
done
commit_complete_rows                         # once more when the run has ended (or was not running)
