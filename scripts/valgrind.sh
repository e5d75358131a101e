#!/usr/bin/env bash
# Runs the whole release test suite under valgrind memcheck: scripts/valgrind.sh
# Any error or definite leak fails the run. Child processes (guard-page and limit scenarios) run
# natively: they are meant to die of a fault, which is not a memcheck finding. No suppressions.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base valgrind
# The release build, with DynArray's valgrind annotations on (reads past size() are reported).
cmake --preset release -B build/valgrind -DRESERVOIR_VALGRIND_ANNOTATIONS=ON >/dev/null
cmake --build build/valgrind --target reservoir_tests reservoir_conformance >/dev/null
for t in reservoir_tests reservoir_conformance; do
  echo "==> valgrind: $t" >&2
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    --show-leak-kinds=definite --track-origins=no --quiet \
    "build/valgrind/tests/$t" --no-intro
done
echo "valgrind: no errors, no definite leaks"
