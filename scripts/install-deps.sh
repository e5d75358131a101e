#!/usr/bin/env bash
# Installs what reservoir's builds need on Debian/Ubuntu, only if missing.
#   scripts/install-deps.sh [base] [windows] [libcxx] [fuzz] [plot] [valgrind] [format] [debuggers]
#   (default: base)
set -euo pipefail

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(base)

want=()
for g in "${groups[@]}"; do
  case "$g" in
    base) want+=(cmake ninja-build g++ ccache clang libclang-rt-14-dev git pkg-config doctest-dev libfmt-dev
                 libcli11-dev libtbb-dev) ;;
    windows) want+=(g++-mingw-w64-x86-64-posix wine64 doctest-dev libfmt-dev libcli11-dev) ;;
    libcxx) want+=(clang libc++-14-dev libc++abi-14-dev doctest-dev libfmt-dev libcli11-dev) ;;
    fuzz) want+=(clang libclang-rt-14-dev) ;;
    plot) want+=(python3 python3-matplotlib) ;;
    valgrind) want+=(valgrind) ;;
    format) want+=(clang-format-19) ;;
    # Optional: without lldb its test reports SKIP; without gdb there are no debugger tests.
    debuggers) want+=(gdb lldb python3) ;;
    *) echo "install-deps.sh: unknown group '$g' (base, windows, libcxx, fuzz, plot, valgrind, format, debuggers)" >&2; exit 2 ;;
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
