#!/usr/bin/env bash
# Builds reservoir-bench (Release) and runs it: scripts/bench.sh [reservoir-bench options]
# With no options it runs the quick tour (about a minute on 2 cores); --help lists the options.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base
cmake --preset release >/dev/null
cmake --build --preset release --target reservoir-bench >/dev/null
# The quick tour (no options) is bounded: cells that would start after 70 s are skipped and say
# so, and no single cell may take more than 20 s, so the run ends in about a minute even on a busy
# 2-core machine.
if [ $# -eq 0 ]; then
  exec build/release/bench/reservoir-bench --budget 70 --cell-budget 20
fi
exec build/release/bench/reservoir-bench "$@"
