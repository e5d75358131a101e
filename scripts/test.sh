#!/usr/bin/env bash
# Builds and runs the tests: scripts/test.sh [PRESET...]   (default: release)
# Presets: release dev asan tsan clang windows-mingw (see CMakePresets.json).
set -euo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(release)

groups=(base)
for p in "${presets[@]}"; do
  [ "$p" = windows-mingw ] && groups+=(windows)
done
scripts/install-deps.sh "${groups[@]}"

for p in "${presets[@]}"; do
  echo "==> test preset: $p" >&2
  cmake --workflow --preset "$p"
done
