#!/usr/bin/env bash
# Runs the test suites under valgrind memcheck: scripts/valgrind.sh
# Any error or definite leak fails the run. No suppressions.
#
# It runs the clang preset's build (debug, with DynArray's valgrind annotations: reads past size()
# into committed memory are reported), building it if needed, so CI compiles it once for its own
# tests and for this. Child processes (guard-page and limit scenarios) run natively: they are meant
# to die of a fault, which is not a memcheck finding.
#
# What runs under valgrind: every suite whose code memcheck sees that the sanitizers do not, i.e.
# all of them but three, which run natively in every preset and under ASan, UBSan and TSan instead:
#   - fault_sweep: millions of operations with injected failures (hours under valgrind);
#   - scale: 30,000 arrays and the address-space limit (valgrind caps the address space itself);
#   - memory_limit: real cgroups and RAM pressure (valgrind's own memory counts in the cgroup).
# Two suites run at once, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh base valgrind
cmake --preset clang >/dev/null
grep -q '^RESERVOIR_VALGRIND_ANNOTATIONS:BOOL=ON' build/clang/CMakeCache.txt ||
  { echo "valgrind.sh: build/clang lacks RESERVOIR_VALGRIND_ANNOTATIONS" >&2; exit 1; }
cmake --build build/clang --target reservoir_tests reservoir_conformance >/dev/null

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
run() {  # run BINARY SUITES: one suite set under memcheck, its output kept for a failure
  local bin=$1 suites=$2 log="$logs/$2.log"
  local start=$SECONDS
  if valgrind --tool=memcheck --error-exitcode=99 --leak-check=full \
    --errors-for-leak-kinds=definite --show-leak-kinds=definite --track-origins=no --quiet \
    "build/clang/tests/$bin" --no-intro --force-colors=false --test-suite="$suites" >"$log" 2>&1; then
    echo "valgrind: $suites passed ($((SECONDS - start)) s)" >&2
  else
    echo "valgrind: $suites FAILED ($((SECONDS - start)) s):" >&2
    tail -80 "$log" >&2
    return 1
  fi
}
export -f run
export logs
# Longest first (under memcheck: dynarray ~3 min, threads and each of the next two ~2 min), so
# that the two lanes end close together.
printf '%s\n' "reservoir_tests dynarray" "reservoir_tests threads" \
  "reservoir_tests slot_pool,sub_page" "reservoir_tests pal,arena,arena_resource,limits" \
  "reservoir_tests concurrent" "reservoir_conformance conformance*" |
  xargs -P 2 -L 1 bash -c 'run "$0" "$1"'
echo "valgrind: no errors, no definite leaks"
