// The process layer of our own programs: what the tests and reservoir-bench ask the OS about
// processes. Start a child, capture its stdout, wait for it, kill it, and see that no child
// outlives the program that started it; this program's peak memory, its path, its environment,
// a time limit on it; Linux's /proc "Key: N kB" lines. Both the tests and the bench link it
// (target reservoir_process, tests/process/CMakeLists.txt); the library never does: its own OS
// calls are pal's, and it is neither installed nor part of the library. One contract, two
// sources: process_posix.cpp (Linux, macOS, FreeBSD) and process_windows.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

namespace reservoir::process {

// ---- this process ------------------------------------------------------------------------------

// Peak resident set size of this process in bytes (Linux VmHWM, macOS ru_maxrss in bytes, FreeBSD
// ru_maxrss in KiB * 1024, Windows PeakWorkingSetSize). 0 if the OS will not tell.
std::size_t peak_rss() noexcept;

// The number of a "Key: N kB" line of a Linux /proc file (/proc/self/status, /proc/meminfo,
// /proc/self/smaps_rollup), in bytes. 0 if the file or the line is not there (other OSes).
std::size_t proc_kib_line(const char* path, const char* key) noexcept;

// This process's id (POSIX pid, Windows process id).
long this_process_id() noexcept;

// Path of the running executable. Empty on failure.
std::string self_executable_path();

// What to execute to start another copy of this very program: on Linux "/proc/self/exe", which
// names the running image even if its file was replaced since (a rebuild during a run), unless
// that is not the program itself (under valgrind); otherwise self_executable_path().
std::string self_reexec_path();

// True when the Windows build runs under Wine rather than Windows; false elsewhere.
bool under_wine();

// Sets an environment variable of this process, which the children it starts inherit. False if
// the OS refused (no memory).
bool set_environment(const char* name, const std::string& value);

// The exit code of a process that outlived its time budget on Windows (see end_after); POSIX
// processes die of SIGALRM instead.
inline constexpr int kTimedOutExitCode = 124;

// Ends this process once `seconds` have passed, unless it ended before (0 or less: never).
// POSIX: alarm(), so it dies of SIGALRM. Windows, which has no alarm: a watchdog thread
// terminates it with kTimedOutExitCode, whatever its other threads are doing (even asleep in a
// wait that will never end).
void end_after(double seconds);

// ---- children ----------------------------------------------------------------------------------
//
// No child started here outlives the process that started it, however that process ends (even
// by SIGKILL or TerminateProcess, which it cannot see coming):
// - Linux: the child is started with PR_SET_PDEATHSIG = SIGKILL; FreeBSD: PROC_PDEATHSIG_CTL.
//   The kernel sends it when the thread that started the child ends: start children from a
//   thread that outlives them (the main thread).
// - other POSIX (macOS, and Linux's posix-generic build): a pipe whose write end only the parent
//   holds (and copies of it that fork without exec made); the child's watch_parent() thread sees
//   it close and kills the child. A child program that never calls watch_parent() is not covered
//   there.
// - Windows: every child is in a job object that kills its processes when its last handle, held
//   by the parent alone, closes.
// end_children_on_signals() adds the orderly end: SIGTERM, SIGINT or SIGHUP kill the children
// first and then end the process by the same signal.

// How a child ended, and what it wrote to stdout.
struct ProcessResult {
  bool exited = false;          // ended by returning from main / exit()
  int exit_code = 0;            // valid if exited
  int signal = 0;               // POSIX: the signal that killed it; Windows: 0
  std::uint32_t exception = 0;  // Windows: the NTSTATUS it died of (0xC0000005 access violation)
  std::string output;           // everything it wrote to stdout
};

// One child process: stdout into a pipe this object reads, stdin and stderr inherited. A Child
// destroyed while its process runs kills it and waits for it, so a test that fails half-way
// leaves no process behind. OS failures carry errno (POSIX, std::generic_category()) or
// GetLastError() (Windows, std::system_category()).
class Child {
 public:
  Child() = default;
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  // Starts `path` with `args` (argv[1..]). Once per Child.
  std::error_code start(const std::string& path, const std::vector<std::string>& args);

  // Reads its stdout to the end, waits for it to end and says how it did.
  std::error_code wait(ProcessResult* out);

  // Ends it at once (SIGKILL; Windows: TerminateProcess, exit code 1); wait() still collects it.
  std::error_code kill() noexcept;

  // Its process id while it runs or is not yet waited for; 0 before start() and after wait().
  long id() const noexcept { return id_; }

 private:
  long id_ = 0;
  std::intptr_t output_ = -1;    // POSIX: the pipe's read end; Windows: its HANDLE
  std::intptr_t process_ = -1;   // Windows: the process HANDLE
  std::intptr_t lifeline_ = -1;  // POSIX without a parent-death signal: the pipe's write end
  int slot_ = -1;                // its place in the table end_children_on_signals() kills from
};

// Runs `path` with `args`, captures its stdout and waits for it: Child::start, then wait.
std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out);

// Ends process `id` at once (SIGKILL; Windows: TerminateProcess, exit code 1).
std::error_code kill_process(long id) noexcept;

// True while process `id` runs. One that has ended is not running, even before its parent
// collects it (a POSIX zombie).
bool process_running(long id);

// Makes SIGTERM, SIGINT and SIGHUP kill this process's children (those of Child and run_process)
// and wait for them, then end this process by that same signal, as if it had not been caught.
// POSIX; nothing on Windows, which has no such signals (its job object covers every end). Call
// it from the main thread before the first child starts. Replaces any handler of those signals.
// An error is the OS's refusal (sigaction).
std::error_code end_children_on_signals();

// Called first thing by a program that runs as a child of another started with Child: where a
// pipe tells the parent's death (see above), starts the thread that watches it. Nothing
// elsewhere, nor in a program not started by Child. An error: the watch could not start.
std::error_code watch_parent();

}  // namespace reservoir::process
