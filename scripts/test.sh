#!/usr/bin/env bash
# Builds and runs the tests: scripts/test.sh [PRESET...]   (default: release)
# Presets: release dev asan tsan clang libcxx posix-generic windows-mingw macos-arm64 macos-x86_64
# (see CMakePresets.json). The macOS presets build everything and check that it is Mach-O; nothing
# here can run it.
set -euo pipefail
cd "$(dirname "$0")/.."

presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=(release)

# Each preset's packages: base is g++ and the libraries; the clang-built presets add their group.
groups=(base)
for p in "${presets[@]}"; do
  case "$p" in
    asan | tsan) groups+=(clang) ;;
    # The clang preset carries valgrind's annotations: their header comes with valgrind.
    clang) groups+=(clang valgrind) ;;
    libcxx | posix-generic) groups+=(libcxx) ;;
    fuzz) groups+=(fuzz) ;;
    windows-mingw) groups+=(windows) ;;
    macos-*) groups+=(macos) ;;
  esac
done
scripts/install-deps.sh "${groups[@]}"

# Under Wine, the first Wine process starts a wineserver that inherits its stdout and stderr. If
# that process is a test, CTest waits for its output pipe until the server quits, and a test that
# passed times out. So start the server (and create the Wine prefix) first, with no pipe to hold.
start_wine() {
  local dir=/usr/lib/wine
  local wine server
  wine=$(command -v wine64 || command -v wine || echo "$dir/wine64")
  server=$(command -v wineserver || echo "$dir/wineserver")
  "$server" -p </dev/null >/dev/null 2>&1 || true  # fails if one is running: fine
  WINEDEBUG=-all "$wine" wineboot --init </dev/null >/dev/null 2>&1 || true
  trap '"'"$server"'" -k >/dev/null 2>&1 || true' EXIT
}

for p in "${presets[@]}"; do
  echo "==> test preset: $p" >&2
  [ "$p" = windows-mingw ] && start_wine
  cmake --workflow --preset "$p"
  case "$p" in
    macos-*) echo "==> $p: built; every program is a Mach-O 64-bit executable (checked with file)." \
               "macOS programs cannot run on this machine: no test of $p was run." >&2 ;;
  esac
done
