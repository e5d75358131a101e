// The bench's own platform layer: what reservoir-bench (and the tests, which share it) ask the OS
// to measure a process and to re-run itself. The library never calls these; its OS calls are in
// <reservoir/pal.hpp>. One contract, two implementations: platform_posix.cpp (Linux, macOS,
// FreeBSD) and platform_windows.cpp, chosen in bench/CMakeLists.txt.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace reservoir::bench {

// ---- process statistics ------------------------------------------------------------------------

// Peak resident set size of this process in bytes (Linux VmHWM, macOS ru_maxrss in bytes, FreeBSD
// ru_maxrss in KiB * 1024, Windows PeakWorkingSetSize). 0 if the OS will not tell.
std::size_t peak_rss() noexcept;

// Bytes of this process's anonymous memory mapped as transparent huge pages now (Linux
// AnonHugePages of /proc/self/smaps_rollup). 0 elsewhere or if the OS will not tell.
std::size_t anon_huge_pages() noexcept;

// Physical memory the OS could give this process now without swapping, in bytes (Linux
// MemAvailable, Windows ullAvailPhys, BSD free+inactive pages). 0 if unknown.
std::size_t available_memory() noexcept;

// "Linux 6.1.0-13-amd64 x86_64", "Windows 10.0.19045 (Wine 8.0)", "Darwin 23.1.0 arm64".
std::string os_description();

// True if standard error is an interactive terminal (the bench shows progress only then).
bool stderr_is_terminal() noexcept;

// ---- processes (bench and tests re-execute themselves to measure or to fault in isolation) -----

struct ProcessResult {
  bool exited = false;          // ended by returning from main / exit()
  int exit_code = 0;            // valid if exited
  int signal = 0;               // POSIX: the signal that killed it; Windows: 0
  std::uint32_t exception = 0;  // Windows: the NTSTATUS it died of (0xC0000005 access violation)
  std::string output;           // everything it wrote to stdout
};

// Path of the running executable. Empty on failure.
std::string self_executable_path();

// What to execute to start another copy of this very program: on Linux "/proc/self/exe", which
// names the running image even if its file was replaced since (a rebuild during a bench run),
// unless that is not the program itself (under valgrind); otherwise self_executable_path().
std::string self_reexec_path();

// The exit code of a child that outlived its time budget on Windows (see end_after); POSIX
// children die of SIGALRM instead.
inline constexpr int kTimedOutExitCode = 124;

// Sets an environment variable of this process, which the children it starts inherit. False if
// the OS refused (no memory).
bool set_environment(const char* name, const std::string& value);

// Ends this process once `seconds` have passed, unless it ended before (0 or less: never).
// POSIX: alarm(), so it dies of SIGALRM. Windows, which has no alarm: a watchdog thread
// terminates it with kTimedOutExitCode, whatever its other threads are doing (even asleep in a
// wait that will never end).
void end_after(double seconds);

// Runs `path` with `args` (argv[1..]), captures its stdout, waits for it. stderr is inherited.
// OS failures carry errno / GetLastError() (reservoir::pal::os_category()).
std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out);

}  // namespace reservoir::bench
