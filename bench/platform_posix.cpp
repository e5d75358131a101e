// The bench's platform layer for POSIX systems: Linux, macOS and FreeBSD. Their differences are
// the marked #if blocks. The posix-generic build (RESERVOIR_POSIX_GENERIC) takes the macOS and
// FreeBSD path for the peak (getrusage) on Linux too, as pal does for its own calls.
#include "platform.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include <reservoir/pal.hpp>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#include <mach/mach.h>
#elif defined(__FreeBSD__)
#include <sys/sysctl.h>
#endif

extern char** environ;

namespace reservoir::bench {
namespace {

std::error_code os_error(int value) noexcept {
  return {value, reservoir::pal::os_category()};
}

std::error_code last_error() noexcept {
  return os_error(errno);
}

#if defined(__linux__)
// A "Key: N kB" line of a /proc file in bytes, or 0.
std::size_t proc_kib_line(const char* path, const char* key) noexcept {
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
}
#endif

#if defined(__APPLE__) || defined(__FreeBSD__)
std::size_t os_page_size() noexcept {
  const long v = ::sysconf(_SC_PAGESIZE);
  return v > 0 ? static_cast<std::size_t>(v) : static_cast<std::size_t>(::getpagesize());
}
#endif

}  // namespace

// ---- process statistics ------------------------------------------------------------------------

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

std::size_t anon_huge_pages() noexcept {
#if defined(__linux__)
  return proc_kib_line("/proc/self/smaps_rollup", "AnonHugePages");
#else
  return 0;
#endif
}

std::size_t available_memory() noexcept {
#if defined(__linux__)
  return proc_kib_line("/proc/meminfo", "MemAvailable");
#elif defined(__APPLE__)
  vm_statistics64_data_t vm{};
  mach_msg_type_number_t count = HOST_VM_INFO64_COUNT;
  // mach_host_self() hands out a send right each call: give it back, or every call leaks one.
  const mach_port_t host = mach_host_self();
  const kern_return_t kr =
      host_statistics64(host, HOST_VM_INFO64, reinterpret_cast<host_info64_t>(&vm), &count);
  (void)mach_port_deallocate(mach_task_self(), host);
  if (kr != KERN_SUCCESS) return 0;
  return (static_cast<std::size_t>(vm.free_count) + vm.inactive_count) * os_page_size();
#elif defined(__FreeBSD__)
  unsigned free_pages = 0, inactive_pages = 0;
  std::size_t len = sizeof(free_pages);
  if (::sysctlbyname("vm.stats.vm.v_free_count", &free_pages, &len, nullptr, 0) != 0) return 0;
  len = sizeof(inactive_pages);
  if (::sysctlbyname("vm.stats.vm.v_inactive_count", &inactive_pages, &len, nullptr, 0) != 0) {
    inactive_pages = 0;
  }
  return (static_cast<std::size_t>(free_pages) + inactive_pages) * os_page_size();
#else
  return 0;
#endif
}

std::string os_description() {
  struct utsname u{};
  if (::uname(&u) != 0) return "unknown POSIX";
  return std::string(u.sysname) + " " + u.release + " " + u.machine;
}

bool stderr_is_terminal() noexcept {
  return ::isatty(STDERR_FILENO) == 1;
}

// ---- processes ---------------------------------------------------------------------------------

std::string self_executable_path() {
#if defined(__linux__)
  char buf[4096];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
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
  std::string path = self_executable_path();
#if defined(__linux__)
  // "/proc/self/exe" is the running image even after its file was replaced, but only when it is
  // the program itself: under valgrind it is valgrind's tool, while readlink reports the client.
  struct stat link_target{}, reported{};
  if (::stat("/proc/self/exe", &link_target) == 0 && ::stat(path.c_str(), &reported) == 0 &&
      link_target.st_dev == reported.st_dev && link_target.st_ino == reported.st_ino) {
    return "/proc/self/exe";
  }
  if (path.empty()) return "/proc/self/exe";
#endif
  return path;
}

bool set_environment(const char* name, const std::string& value) {
  return ::setenv(name, value.c_str(), 1) == 0;
}

void end_after(double seconds) {
  if (seconds > 0) alarm(static_cast<unsigned>(std::ceil(seconds)));
}

std::error_code run_process(const std::string& path, const std::vector<std::string>& args,
                            ProcessResult* out) {
  // 1. A pipe for the child's stdout.
  int fds[2];
  if (::pipe(fds) != 0) return last_error();
  for (int fd : fds) {
    if (::fcntl(fd, F_SETFD, FD_CLOEXEC) != 0) {
      std::error_code ec = last_error();
      ::close(fds[0]);
      ::close(fds[1]);
      return ec;
    }
  }
  // 2. Spawn with the write end as stdout.
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  int rc = ::posix_spawn_file_actions_init(&actions);
  if (rc == 0) rc = ::posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return os_error(rc);
  }
  // 3. Read until EOF, then reap.
  ProcessResult result;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    result.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return last_error();
  }
  if (WIFEXITED(status)) {
    result.exited = true;
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  *out = std::move(result);
  return {};
}

}  // namespace reservoir::bench
