// The bench's own platform layer: what reservoir-bench asks the OS about the machine. Its child
// processes, peak memory, path and time limit come from the process layer it shares with the
// tests (tests/process/process.hpp, target reservoir_process), whose names are brought in here.
// The library never calls either; its OS calls are in pal. One contract, two implementations:
// platform_posix.cpp (Linux, macOS, FreeBSD) and platform_windows.cpp, chosen in
// bench/CMakeLists.txt.
#pragma once

#include <cstddef>
#include <string>

#include "process.hpp"

namespace reservoir::bench {

// ---- from the process layer --------------------------------------------------------------------

using reservoir::process::end_after;
using reservoir::process::end_children_on_signals;
using reservoir::process::kTimedOutExitCode;
using reservoir::process::peak_rss;
using reservoir::process::ProcessResult;
using reservoir::process::run_process;
using reservoir::process::self_executable_path;
using reservoir::process::self_reexec_path;
using reservoir::process::set_environment;
using reservoir::process::this_process_id;
using reservoir::process::watch_parent;

// ---- the machine -------------------------------------------------------------------------------

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

}  // namespace reservoir::bench
