#!/usr/bin/env bash
# Installs what reservoir's builds need on Debian/Ubuntu, only what is missing.
#   scripts/install-deps.sh [GROUP...]   (default: base)
# Groups, what needs them, and about how much a fresh Debian 12 downloads for each (the .debs of
# the group and its dependencies beyond base, from apt-cache's sizes):
#   base       the README's two commands: scripts/bench.sh and scripts/test.sh (release preset):
#              cmake, ninja, g++, ccache, git, pkg-config, doctest, fmt, CLI11, TBB (the
#              bench's tbb::concurrent_vector contender)                              ~110 MB
#   clang      presets clang and tsan: clang 14 and its sanitizer runtimes             ~55 MB
#   libcxx     presets libcxx, posix-generic: clang 14 with LLVM's libc++ 14           ~50 MB
#   fuzz       preset fuzz, scripts/fuzz.sh: clang 14 and libFuzzer's runtime          ~55 MB
#   windows    preset windows-mingw: MinGW-w64 g++ and Wine to run the tests          ~195 MB
#   valgrind   scripts/valgrind.sh and the clang preset (valgrind's annotations)       ~20 MB
#   format     scripts/format.sh: clang-format 19                                      ~55 MB
#   plot       scripts/plot_bench.py, scripts/results.py --plots: matplotlib          ~100 MB
#   debuggers  the debugger tests (gdb, lldb); without them those tests are not run   ~125 MB
# scripts/test.sh picks the groups its presets need.
set -euo pipefail

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(base)

want=()
for g in "${groups[@]}"; do
  case "$g" in
    base) want+=(cmake ninja-build g++ ccache git pkg-config doctest-dev libfmt-dev libcli11-dev
                 libtbb-dev) ;;
    clang) want+=(clang libclang-rt-14-dev) ;;
    libcxx) want+=(clang libc++-14-dev libc++abi-14-dev doctest-dev libfmt-dev libcli11-dev) ;;
    fuzz) want+=(clang libclang-rt-14-dev) ;;
    windows) want+=(g++-mingw-w64-x86-64-posix wine64 doctest-dev libfmt-dev libcli11-dev) ;;
    plot) want+=(python3 python3-matplotlib) ;;
    valgrind) want+=(valgrind) ;;
    format) want+=(clang-format-19) ;;
    # Optional: without lldb its test reports SKIP; without gdb there are no debugger tests.
    debuggers) want+=(gdb lldb python3) ;;
    *) echo "install-deps.sh: unknown group '$g' (base, clang, libcxx, fuzz, windows, valgrind, format, plot, debuggers)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps.sh: missing ${missing[*]} and no apt-get here; install them by hand." >&2
  echo "  (CMake fetches doctest, fmt and CLI11 itself when they are not installed.)" >&2
  exit 0
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
echo "install-deps.sh: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
