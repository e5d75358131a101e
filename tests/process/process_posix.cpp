// The process layer for POSIX systems: Linux, macOS and FreeBSD. Their differences are the marked
// #if blocks. The posix-generic build (RESERVOIR_POSIX_GENERIC) takes the macOS path on Linux:
// the peak from getrusage, and the pipe instead of the parent-death signal.
#include "process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#if defined(__linux__)
#include <sys/prctl.h>
#elif defined(__APPLE__)
#include <mach-o/dyld.h>
#elif defined(__FreeBSD__)
#include <sys/procctl.h>
#include <sys/sysctl.h>
#endif

extern char** environ;

namespace reservoir::process {
namespace {

std::error_code os_error(int value) noexcept {
  return {value, std::generic_category()};
}

// How a child learns that its parent died: the kernel's signal (Linux, FreeBSD), or the pipe
// (the others, and Linux's posix-generic build, so that path is tested there).
#if defined(__linux__) && !defined(RESERVOIR_POSIX_GENERIC)
#define RESERVOIR_PROCESS_DEATH_SIGNAL 1
#elif defined(__FreeBSD__)
#define RESERVOIR_PROCESS_DEATH_SIGNAL 1
#endif
#if defined(RESERVOIR_PROCESS_DEATH_SIGNAL)
constexpr bool kLifeline = false;
#else
constexpr bool kLifeline = true;
#endif
// The child's environment names the file descriptor of its end of the pipe.
constexpr char kLifelineVariable[] = "RESERVOIR_PROCESS_LIFELINE";

// A pipe whose both ends close on exec, so another child started meanwhile does not hold them.
int cloexec_pipe(int fds[2]) noexcept {
#if defined(__linux__) || defined(__FreeBSD__)
  return ::pipe2(fds, O_CLOEXEC);
#else
  if (::pipe(fds) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (::fcntl(fds[i], F_SETFD, FD_CLOEXEC) != 0) {
      const int saved = errno;
      ::close(fds[0]);
      ::close(fds[1]);
      errno = saved;
      return -1;
    }
  }
  return 0;
#endif
}

void close_fd(int& fd) noexcept {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// The children running now, for the signal handler: a pid is in the table from just after its
// fork until its process has ended and just before it is collected, so the handler never kills
// a number the OS has given to another process since.
constexpr int kSlots = 64;
std::atomic<pid_t> g_children[kSlots];

int take_slot(pid_t pid) noexcept {
  for (int i = 0; i < kSlots; ++i) {
    pid_t free_slot = 0;
    if (g_children[i].compare_exchange_strong(free_slot, pid)) return i;
  }
  return -1;  // more children at once than slots: the ones beyond have the kernel's guarantee only
}

void release_slot(int& slot) noexcept {
  if (slot >= 0) g_children[slot].store(0);
  slot = -1;
}

// SIGTERM, SIGINT, SIGHUP (SA_RESETHAND: their default action is back when this runs). Only
// async-signal-safe calls.
extern "C" void end_children_then_this(int sig) {
  for (auto& slot : g_children) {
    if (const pid_t pid = slot.load(); pid > 0) (void)::kill(pid, SIGKILL);
  }
  for (auto& slot : g_children) {
    if (const pid_t pid = slot.load(); pid > 0) {
      while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
  }
  // Blocked while this handler runs: delivered, with its default action, once it returns.
  (void)::raise(sig);
}

// In the child between fork and exec: async-signal-safe calls only. A failure's errno goes to the
// parent through `report`.
[[noreturn]] void exec_child(const char* path, char* const* argv, char* const* envp, int out,
                             int report, int lifeline, pid_t parent) noexcept {
  const auto fail = [report](int error) {
    if (::write(report, &error, sizeof error) < 0) {
      // Nothing to do: the parent sees exit code 127 without the reason.
    }
    ::_exit(127);
  };
#if defined(__linux__) && !defined(RESERVOIR_POSIX_GENERIC)
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail(errno);
#elif defined(__FreeBSD__)
  int death_signal = SIGKILL;
  if (::procctl(P_PID, 0, PROC_PDEATHSIG_CTL, &death_signal) != 0) fail(errno);
#endif
  // A parent that died before the line above sends no signal: this child was handed to another
  // parent already.
  if (::getppid() != parent) ::_exit(127);
  // dup2 makes a descriptor without FD_CLOEXEC, except onto itself.
  if (out == STDOUT_FILENO ? ::fcntl(out, F_SETFD, 0) != 0 : ::dup2(out, STDOUT_FILENO) < 0) {
    fail(errno);
  }
  if (lifeline >= 0 && ::fcntl(lifeline, F_SETFD, 0) != 0) fail(errno);
  ::execve(path, argv, envp);
  fail(errno);
  ::_exit(127);  // not reached: fail does not return
}

}  // namespace

// ---- this process ------------------------------------------------------------------------------

std::size_t proc_kib_line(const char* path, const char* key) noexcept {
#if defined(__linux__)
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  const std::size_t key_len = std::strlen(key);
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, key_len) == 0 && line[key_len] == ':' &&
        std::sscanf(line + key_len + 1, " %llu kB", &kib) == 1) {
      break;
    }
  }
  std::fclose(f);
  return static_cast<std::size_t>(kib) * 1024;
#else
  (void)path;
  (void)key;
  return 0;
#endif
}

std::size_t peak_rss() noexcept {
#if defined(__linux__) && !defined(RESERVOIR_POSIX_GENERIC)
  // VmHWM, not ru_maxrss: the kernel carries ru_maxrss across fork+exec from the parent.
  if (std::size_t v = proc_kib_line("/proc/self/status", "VmHWM")) return v;
#endif
  struct rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
#if defined(__APPLE__)
  return static_cast<std::size_t>(ru.ru_maxrss);  // bytes on macOS
#else
  return static_cast<std::size_t>(ru.ru_maxrss) * 1024;  // KiB on Linux and FreeBSD
#endif
}

long this_process_id() noexcept {
  return static_cast<long>(::getpid());
}

std::string self_executable_path() {
#if defined(__linux__)
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
#elif defined(__APPLE__)
  char buf[4096];
  std::uint32_t size = sizeof(buf);
  if (_NSGetExecutablePath(buf, &size) != 0) return {};
  return std::string(buf);
#elif defined(__FreeBSD__)
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PATHNAME, -1};
  char buf[4096];
  std::size_t len = sizeof(buf);
  if (::sysctl(mib, 4, buf, &len, nullptr, 0) != 0 || len == 0) return {};
  return std::string(buf);
#else
  return {};
#endif
}

std::string self_reexec_path() {
  const std::string path = self_executable_path();
#if defined(__linux__)
  // "/proc/self/exe" is the running image even after its file was replaced, but only when it is
  // the program itself: under valgrind it is valgrind's tool, while readlink reports the client.
  struct stat link_target{}, reported{};
  if (path.empty() ||
      (::stat("/proc/self/exe", &link_target) == 0 && ::stat(path.c_str(), &reported) == 0 &&
       link_target.st_dev == reported.st_dev && link_target.st_ino == reported.st_ino)) {
    return "/proc/self/exe";
  }
#endif
  return path;
}

bool under_wine() {
  return false;
}

bool set_environment(const char* name, const std::string& value) {
  return ::setenv(name, value.c_str(), 1) == 0;
}

void end_after(double seconds) {
  if (seconds > 0) ::alarm(static_cast<unsigned>(std::ceil(seconds)));
}

// ---- children ----------------------------------------------------------------------------------

std::error_code Child::start(const std::string& path, const std::vector<std::string>& args) {
  if (id_ != 0) return std::make_error_code(std::errc::device_or_resource_busy);
  // Everything the child needs is made before the fork: after it, the child may only make
  // async-signal-safe calls (another thread may hold malloc's lock).
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  int out[2] = {-1, -1}, report[2] = {-1, -1}, lifeline[2] = {-1, -1};
  const auto close_all = [&] {
    for (int* pair : {out, report, lifeline}) {
      close_fd(pair[0]);
      close_fd(pair[1]);
    }
  };
  if (cloexec_pipe(out) != 0 || cloexec_pipe(report) != 0 ||
      (kLifeline && cloexec_pipe(lifeline) != 0)) {
    const std::error_code ec = os_error(errno);
    close_all();
    return ec;
  }
  // The child's environment: this one's, with the lifeline's descriptor where there is one.
  std::string lifeline_entry;
  std::vector<char*> envp;
  char* const* child_env = environ;
  if (kLifeline) {
    lifeline_entry = std::string(kLifelineVariable) + "=" + std::to_string(lifeline[0]);
    const std::size_t prefix = sizeof kLifelineVariable;  // the name and its '='
    for (char** e = environ; *e != nullptr; ++e) {
      if (std::strncmp(*e, lifeline_entry.c_str(), prefix) != 0) envp.push_back(*e);
    }
    envp.push_back(lifeline_entry.data());
    envp.push_back(nullptr);
    child_env = envp.data();
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const std::error_code ec = os_error(errno);
    close_all();
    return ec;
  }
  if (pid == 0)
    exec_child(path.c_str(), argv.data(), child_env, out[1], report[1], lifeline[0], parent);
  slot_ = take_slot(pid);
  close_fd(out[1]);
  close_fd(report[1]);
  close_fd(lifeline[0]);
  // The report pipe closes at exec (nothing read) or carries the errno of what failed before.
  int child_error = 0;
  ssize_t n = 0;
  while ((n = ::read(report[0], &child_error, sizeof child_error)) < 0 && errno == EINTR) {
  }
  close_fd(report[0]);
  if (n == sizeof child_error) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    release_slot(slot_);
    close_all();
    return os_error(child_error);
  }
  id_ = pid;
  output_ = out[0];
  lifeline_ = lifeline[1];
  return {};
}

std::error_code Child::wait(ProcessResult* out) {
  if (id_ == 0) return std::make_error_code(std::errc::no_child_process);
  ProcessResult result;
  int fd = static_cast<int>(output_);
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  close_fd(fd);
  output_ = -1;
  // Wait for its end without collecting it, take it out of the table, then collect it.
  const auto pid = static_cast<pid_t>(id_);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT) < 0) {
    if (errno != EINTR) return os_error(errno);
  }
  release_slot(slot_);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return os_error(errno);
  }
  id_ = 0;
  int lifeline = static_cast<int>(lifeline_);
  close_fd(lifeline);
  lifeline_ = -1;
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  *out = std::move(result);
  return {};
}

std::error_code Child::kill() noexcept {
  if (id_ == 0) return std::make_error_code(std::errc::no_child_process);
  return kill_process(id_);
}

std::error_code kill_process(long id) noexcept {
  if (::kill(static_cast<pid_t>(id), SIGKILL) != 0) return os_error(errno);
  return {};
}

bool process_running(long id) {
  if (id <= 0) return false;
#if defined(__linux__)
  // The state is the field after the command's closing parenthesis: Z (zombie) or X (dead).
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%ld/stat", id);
  std::FILE* f = std::fopen(path, "re");
  if (f == nullptr) return false;
  char text[512];
  const std::size_t n = std::fread(text, 1, sizeof text - 1, f);
  std::fclose(f);
  text[n] = '\0';
  const char* close_paren = std::strrchr(text, ')');
  if (close_paren == nullptr || close_paren[1] != ' ') return false;
  return close_paren[2] != 'Z' && close_paren[2] != 'X';
#else
  return ::kill(static_cast<pid_t>(id), 0) == 0 || errno == EPERM;
#endif
}

std::error_code end_children_on_signals() {
  struct sigaction action{};
  action.sa_handler = end_children_then_this;
  action.sa_flags = SA_RESETHAND;
  // Unqualified: macOS's <signal.h> defines sigemptyset as a macro.
  if (sigemptyset(&action.sa_mask) != 0) return os_error(errno);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    if (::sigaction(sig, &action, nullptr) != 0) return os_error(errno);
  }
  return {};
}

std::error_code watch_parent() {
  if (!kLifeline) return {};
  const char* value = std::getenv(kLifelineVariable);
  if (value == nullptr) return {};
  const int fd = std::atoi(value);
  // Not for this child's own children: they get a pipe of their own, or none.
  if (::unsetenv(kLifelineVariable) != 0) return os_error(errno);
  if (fd < 0) return os_error(EBADF);
  if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) return os_error(errno);
  try {
    std::thread([fd] {
      char byte = 0;
      for (;;) {
        const ssize_t n = ::read(fd, &byte, 1);
        if (n < 0 && errno == EINTR) continue;
        // End of file: the parent, the only writer, has ended. The parent never writes.
        if (n == 0) (void)::kill(::getpid(), SIGKILL);
        return;
      }
    }).detach();
  } catch (const std::system_error& e) {
    return e.code();
  }
  return {};
}

}  // namespace reservoir::process
