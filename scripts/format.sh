#!/usr/bin/env bash
# Formats every tracked C++ file with clang-format 19 and the repository's .clang-format.
#   scripts/format.sh          rewrite the files in place
#   scripts/format.sh --check  change nothing; fail and name the files that are not formatted
# clang-format 14 (Debian's default) mangles requires-clauses and concepts, so version 19 is
# pinned (Debian's clang-format-19, installed by scripts/install-deps.sh format).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh format
fmt=$(command -v clang-format-19 || true)
if [ -z "$fmt" ]; then
  echo "format.sh: clang-format-19 not found (scripts/install-deps.sh format installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
if [ "${1:-}" = --check ]; then
  "$fmt" --dry-run --Werror "${files[@]}"
  echo "format.sh: ${#files[@]} files formatted as .clang-format says"
else
  "$fmt" -i "${files[@]}"
fi
