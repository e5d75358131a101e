#!/usr/bin/env bash
# Builds reservoir-bench (Release) and runs it: scripts/bench.sh [reservoir-bench options]
# With no options it runs reservoir-bench's default, the quick tour: about a minute on 2 cores
# (its cells are bounded by --budget 70 --cell-budget 20). --help lists the options.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base
echo "bench.sh: building reservoir-bench (about 90 s the first time)" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { cmake --preset release && cmake --build --preset release --target reservoir-bench; } \
    >"$log" 2>&1; then
  cat "$log" >&2
  echo "bench.sh: the build failed (output above)" >&2
  exit 1
fi
build/release/bench/reservoir-bench "$@"
