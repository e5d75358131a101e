#!/usr/bin/env bash
# Proves the package: installs reservoir to a temporary prefix, then builds and runs the consumer
# project in tests/consumer three ways (installed package, add_subdirectory, FetchContent of the
# committed HEAD), and once more through pkg-config.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Runs a command quietly; prints its output if it fails.
quiet() {
  if ! "$@" >"$work/log" 2>&1; then
    cat "$work/log" >&2
    echo "test-consumers.sh: failed: $*" >&2
    exit 1
  fi
}

echo "==> install reservoir into $work/prefix" >&2
quiet cmake -S . -B "$work/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release -DRESERVOIR_BUILD_TESTS=OFF \
  -DRESERVOIR_BUILD_BENCH=OFF -DRESERVOIR_BUILD_EXAMPLES=OFF
quiet cmake --build "$work/lib"
quiet cmake --install "$work/lib" --prefix "$work/prefix"
pcdir=$(dirname "$(find "$work/prefix" -name reservoir.pc)")
test -f "$pcdir/reservoir.pc" || { echo "no pkg-config file installed" >&2; exit 1; }
test -n "$(find "$work/prefix" -name reservoirConfigVersion.cmake)" || { echo "no version file" >&2; exit 1; }

for mode in package subdirectory fetchcontent; do
  echo "==> consumer via $mode" >&2
  quiet cmake -S tests/consumer -B "$work/consumer-$mode" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DRESERVOIR_CONSUME=$mode -DRESERVOIR_SOURCE_DIR="$root" -DCMAKE_PREFIX_PATH="$work/prefix"
  quiet cmake --build "$work/consumer-$mode"
  ctest --test-dir "$work/consumer-$mode" --output-on-failure
done

echo "==> pkg-config consumer" >&2
g++ tests/consumer/main.cpp $(PKG_CONFIG_PATH="$pcdir" pkg-config --static --cflags --libs reservoir) \
  -o "$work/pc-consumer"
"$work/pc-consumer"
