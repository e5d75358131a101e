#!/usr/bin/env bash
# Proves the package: installs reservoir to a temporary prefix, then builds and runs the consumer
# project in tests/consumer three ways (installed package, add_subdirectory, FetchContent of the
# committed HEAD), and once more through pkg-config with g++ and clang++ at C++20 and C++2b.
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

# pkg-config: the flags require nothing of the language standard (the consumer picks it, C++20 or
# newer), so they must never carry -std; a build as C++2b must stay C++2b (main.cpp checks
# __cplusplus when RESERVOIR_CONSUMER_EXPECT_CXX is given), and one as C++17 must stop at the
# header's one-line "requires C++20" error.
pcflags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --static --cflags --libs reservoir)
case " $pcflags " in
  *" -std="*) echo "test-consumers.sh: pkg-config forces the standard: $pcflags" >&2; exit 1 ;;
esac
compilers=(g++)
command -v clang++ >/dev/null && compilers+=(clang++)
for cxx in "${compilers[@]}"; do
  echo "==> pkg-config consumer ($cxx -std=c++20)" >&2
  quiet "$cxx" -std=c++20 -DRESERVOIR_CONSUMER_EXPECT_CXX=202002L tests/consumer/main.cpp $pcflags \
    -o "$work/pc-consumer"
  "$work/pc-consumer"
  # c++2b: the newest standard that both g++ 12 and clang 14 know (__cplusplus above 202002L).
  echo "==> pkg-config consumer ($cxx -std=c++2b keeps its standard)" >&2
  quiet "$cxx" -std=c++2b -DRESERVOIR_CONSUMER_EXPECT_CXX=202100L tests/consumer/main.cpp $pcflags \
    -o "$work/pc-consumer-2b"
  "$work/pc-consumer-2b"
  echo "==> pkg-config consumer ($cxx -std=c++17 is refused with one clear error)" >&2
  if "$cxx" -std=c++17 -fsyntax-only tests/consumer/main.cpp $pcflags >"$work/log" 2>&1; then
    echo "test-consumers.sh: a C++17 build of the consumer compiled" >&2
    exit 1
  fi
  grep -q "reservoir requires C++20 or newer" "$work/log" || {
    cat "$work/log" >&2
    echo "test-consumers.sh: a C++17 build failed without the header's C++20 message" >&2
    exit 1
  }
done
