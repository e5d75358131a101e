#!/usr/bin/env bash
# Builds everything (Release) and runs the stable-addresses example until reservoir-bench lands.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/examples/stable_addresses "$@"
