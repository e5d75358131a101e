#!/usr/bin/env bash
# Runs the release test suite under valgrind memcheck: scripts/valgrind.sh
# Any error or definite leak fails the run. Child processes (guard-page and limit scenarios) run
# natively: they are meant to die of a fault, which is not a memcheck finding. No suppressions.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base valgrind
cmake --preset release >/dev/null
cmake --build --preset release --target reservoir_tests >/dev/null
# The limit tests set RLIMIT_AS in a child; the sweep repeats the same checks many times: both
# run in the other presets. Everything else runs under memcheck.
valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
  --show-leak-kinds=definite --track-origins=no --quiet \
  build/release/tests/reservoir_tests --test-suite-exclude=fault_sweep,limits --no-intro
echo "valgrind: no errors, no definite leaks"
