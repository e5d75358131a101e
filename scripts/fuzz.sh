#!/usr/bin/env bash
# Builds the libFuzzer target (clang, ASan + UBSan) and runs it: scripts/fuzz.sh [SECONDS]
# (default 120). It starts from the committed seed corpus (tests/fuzz/corpus) in a scratch copy,
# and exits non-zero on any finding (the crashing input is left in the current directory).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-120}
scripts/install-deps.sh base fuzz
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp tests/fuzz/corpus/* "$work/"
build/fuzz/tests/fuzz/fuzz_reservoir "$work" -max_total_time="$seconds" -timeout=20 \
  -rss_limit_mb=4096 -max_len=2048 -print_final_stats=1 2>&1 | tee "$work/fuzz.log" | \
  grep -E '^(#[0-9]+ +DONE|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|fuzz_reservoir:)' || true
grep -q 'stat::number_of_executed_units' "$work/fuzz.log" || { tail -40 "$work/fuzz.log"; exit 1; }
if grep -qE '==[0-9]+==ERROR|SUMMARY: |runtime error|fuzz_reservoir: model mismatch|deadly signal' "$work/fuzz.log"; then
  tail -60 "$work/fuzz.log"
  exit 1
fi
echo "fuzz: no finding in ${seconds} s"
