#!/usr/bin/env bash
# Builds reservoir-bench (Release) and runs it: scripts/bench.sh [reservoir-bench options]
# With no options it runs the quick tour (about a minute on 2 cores); --help lists the options.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base
cmake --preset release >/dev/null
cmake --build --preset release --target reservoir-bench >/dev/null
exec build/release/bench/reservoir-bench "$@"
